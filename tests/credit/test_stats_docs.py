"""docs/credit.md's examples of the ``agentbench_crbc.credit.stats`` helpers run and print what the page says."""

from __future__ import annotations

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "credit.md"


def test_the_stats_examples_print_what_the_docs_say():
    section = DOC.read_text().split("### Group statistics")[1].split("\n## ")[0]
    section = "\n".join("" if line.startswith("```") else line for line in section.splitlines())  # fences end
    examples = doctest.DocTestParser().get_doctest(section, {}, "docs/credit.md: Group statistics", str(DOC), 0)
    assert len(examples.examples) >= 15  # every helper has one
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(examples)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted == len(examples.examples)


def test_the_check_credit_assigner_example_names_real_parameters():
    import inspect

    from agentbench_crbc.testing import check_credit_assigner

    params = inspect.signature(check_credit_assigner).parameters
    assert {"options", "batched", "extra", "seeds"} <= set(params)
    text = DOC.read_text()
    assert "check_credit_assigner(fn, *, options=None, batched=None, extra=(), seeds=6)" in text
