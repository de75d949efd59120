"""``abc play sokoban``: play in a pygame window or the terminal, ask the solver for hints, watch it solve."""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections.abc import Iterable
from typing import IO, Any

import numpy as np

from agentbench_crbc.errors import ConfigError, EnvError

__all__ = ["HELP", "KEYS", "LEGEND", "Window", "make_env", "parse_settings", "play_terminal", "play_window", "run"]

#: Key or word -> action (or a command: restart, next, hint, solve, quit).
KEYS: dict[str, str] = {
    "w": "up",
    "k": "up",
    "up": "up",
    "s": "down",
    "j": "down",
    "down": "down",
    "a": "left",
    "h": "left",
    "left": "left",
    "d": "right",
    "l": "right",
    "right": "right",
    "r": "restart",
    "n": "next",
    "?": "hint",
    "hint": "hint",
    "solve": "solve",
    "q": "quit",
    "quit": "quit",
    "escape": "quit",
    "space": "solve",
    "return": "next",
}
HELP = (
    "move: w/a/s/d, h/j/k/l or up/down/left/right (several per line: 'ddw'); r restart, n next level, "
    "? hint, solve (the solver plays), q quit"
)
#: What each symbol of the text grid means (the paper's symbols, :data:`~.level.SYMBOLS`).
LEGEND = "legend: # wall  _ floor  O target  X box  √ box on target  P you  S you on a target"


class Window:
    """A pygame window showing RGB frames (pygame imported only here; ``SDL_VIDEODRIVER=dummy``: headless)."""

    def __init__(self, caption: str = "abc Sokoban", scale: int = 4, fps: int = 4) -> None:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        try:
            import pygame
        except ImportError as e:  # pragma: no cover - depends on the install
            raise EnvError(
                "the Sokoban window needs pygame: pip install 'agentbench-crbc[sokoban]', or play in the "
                "terminal with --ui terminal"
            ) from e
        self._pg = pygame
        pygame.display.init()
        pygame.display.set_caption(caption)
        self.scale, self.fps = scale, fps
        self.surface: Any = None
        self.clock = pygame.time.Clock()

    def show(self, frame: np.ndarray) -> None:
        """Draw an (H, W, 3) uint8 frame, scaled up."""
        pg = self._pg
        size = (frame.shape[1] * self.scale, frame.shape[0] * self.scale)
        if self.surface is None or self.surface.get_size() != size:
            self.surface = pg.display.set_mode(size)
        image = pg.surfarray.make_surface(np.ascontiguousarray(frame.transpose(1, 0, 2)))
        self.surface.blit(pg.transform.scale(image, size), (0, 0))
        pg.display.flip()

    def keys(self) -> list[str]:
        """Names of the keys pressed since the last call (``quit`` when the window is closed)."""
        pg = self._pg
        out = []
        for event in pg.event.get():
            if event.type == pg.QUIT:
                out.append("quit")
            elif event.type == pg.KEYDOWN:
                out.append(pg.key.name(event.key))
        return out

    def post(self, names: Iterable[str]) -> None:
        """Queue key presses as real pygame events (scripted play and tests)."""
        pg = self._pg
        for name in names:
            pg.event.post(pg.event.Event(pg.KEYDOWN, key=pg.key.key_code(name)))

    def close(self) -> None:
        self._pg.display.quit()


def parse_settings(pairs: Iterable[str]) -> dict[str, Any]:
    """``["size=7", "obs_mode=text"]`` -> ``{"size": 7, "obs_mode": "text"}`` (literals, else strings)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: write KEY=VALUE, e.g. --set size=7 --set num_boxes=2")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


def make_env(settings: dict[str, Any], render_mode: str | None = None) -> Any:
    """``gymnasium.make`` of ``settings.pop("id", "abc/Sokoban-v0")``, the other settings as env keywords."""
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401  (registers the ids)

    settings = dict(settings)
    env_id = settings.pop("id", "abc/Sokoban-v0")
    if "max_steps" in settings:
        settings.setdefault("max_episode_steps", settings["max_steps"])
    return gym.make(env_id, render_mode=render_mode, **settings)


class _Game:
    """Shared logic of both interfaces: apply commands, keep score, print status."""

    def __init__(self, env: Any, seed: int, out: IO[str]) -> None:
        from .solver import expert_policy

        self.env, self.seed, self.out = env, seed, out
        self.expert = expert_policy(env)
        self.restart()

    def restart(self) -> None:
        self.obs, self.info = self.env.reset(seed=self.seed)
        self.ret, self.steps, self.over = 0.0, 0, False
        self.say(f"level seed {self.seed} ({self.info['subtask']})  {LEGEND}\n{self.info['text']}")

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def command(self, cmd: str) -> bool:
        """Apply one command; False when the player quits."""
        if cmd == "quit":
            return False
        if cmd == "restart":
            self.restart()
        elif cmd == "next":
            self.seed += 1
            self.restart()
        elif cmd == "hint":
            self.say(f"hint: {self.expert(self.obs, self.info)}" if not self.over else "hint: press n")
        elif cmd == "solve":
            while not self.over:
                self.act(self.expert(self.obs, self.info))
        else:
            self.act(cmd)
        return True

    def act(self, action: str) -> None:
        if self.over:
            self.say("episode over: r to restart, n for the next level")
            return
        before = self.info["text"]
        self.obs, reward, terminated, truncated, self.info = self.env.step(action)
        self.ret += reward
        self.steps += 1
        self.over = terminated or truncated
        blocked = " (blocked: a wall, or a box that cannot move; the step still counts)" \
            if self.info["text"] == before else ""
        self.say(f"{action}: reward {reward:+.1f}, return {self.ret:+.1f}, step {self.steps}{blocked}\n"
                 f"{self.info['text']}")
        if terminated and self.info["success"]:
            self.say(f"solved in {self.steps} steps! n for the next level, q to quit")
        elif truncated:
            self.say("out of steps: r to retry, n for the next level")


def play_terminal(env: Any, seed: int = 0, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> dict:
    """Read commands line by line (see :data:`HELP`) until ``q`` or end of input; returns the last info."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    game = _Game(env, seed, stdout)
    game.say(HELP)
    for line in stdin:
        words = line.strip().lower().split()
        if len(words) == 1 and words[0] not in KEYS and all(ch in KEYS for ch in words[0]):
            words = list(words[0])  # 'ddw' -> d, d, w
        for word in words:
            cmd = KEYS.get(word)
            if cmd is None:
                game.say(f"unknown input {word!r}; {HELP}")
            elif not game.command(cmd):
                return game.info
    return game.info


def play_window(env: Any, seed: int = 0, script: Iterable[str] | None = None, out: IO[str] | None = None) -> dict:
    """Play in a pygame window (arrows or WASD, r, n, h hint, space solve, q/esc quit); ``script`` key names
    are queued as real key events and the window closes once they are used up. Returns the last info."""
    window = Window()
    game = _Game(env, seed, out or sys.stdout)
    scripted = script is not None
    if scripted:
        window.post(script or ())
    aliases = {"h": "hint"}
    try:
        while True:
            window.show(env.unwrapped.rgb_frame())
            names = window.keys()
            if scripted and not names:
                return game.info
            for name in names:
                cmd = KEYS.get(aliases.get(name, name))
                if cmd is not None and not game.command(cmd):
                    return game.info
            if not scripted:
                window.clock.tick(30)
    finally:
        window.close()


def _has_display() -> bool:
    return bool(
        os.environ.get("DISPLAY")
        or os.environ.get("WAYLAND_DISPLAY")
        or os.environ.get("SDL_VIDEODRIVER")
        or sys.platform in ("win32", "darwin")
    )


def run(args: argparse.Namespace) -> int:
    """Entry of ``abc play sokoban [--seed N] [--ui window|terminal] [--set KEY=VALUE ...]``: exit status 0 when
    the last level played ends solved, 1 when the player quits (or the input ends) before."""
    settings = parse_settings(getattr(args, "set", None) or [])
    ui = getattr(args, "ui", "auto")
    if ui == "auto":
        ui = "window" if _has_display() and sys.stdin.isatty() else "terminal"
    if ui not in ("window", "terminal"):
        raise ConfigError(f"--ui {ui!r}: Sokoban plays in 'window' or 'terminal'")
    if ui == "window" and not _has_display():  # SDL would wait for a display that never comes
        raise ConfigError("--ui window: no display here (DISPLAY and WAYLAND_DISPLAY are unset); play in the "
                          "terminal with --ui terminal")
    env = make_env(settings)
    try:
        info = play_window(env, args.seed) if ui == "window" else play_terminal(env, args.seed)
    finally:
        env.close()
    return 0 if info.get("success") else 1
