// Selecting an option reloads the item page with that option chosen (as WebShop's item page does).
document.querySelectorAll('input[type="radio"][data-url]').forEach(function (radio) {
  radio.addEventListener('click', function () { window.location.href = radio.dataset.url; });
});
