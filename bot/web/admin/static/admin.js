// The editor's desk, a little quicker: every form works without this file
// (a POST, then the page again); with it, a change is sent in the background
// and only the page's <main> is swapped, so the place on the page is kept.
// Plain script from our own origin: no CDN, no build step, no inline code
// (the console's CSP forbids it). Forms marked data-plain are left alone.
"use strict";

(function () {
  var busy = false;

  function swapMain(html, url) {
    var doc = new DOMParser().parseFromString(html, "text/html");
    var fresh = doc.getElementById("main");
    var main = document.getElementById("main");
    if (!fresh || !main) { window.location.href = url; return; }
    var x = window.scrollX, y = window.scrollY;
    main.innerHTML = fresh.innerHTML;
    document.title = doc.title;
    if (url && url !== window.location.href) { window.history.replaceState(null, "", url); }
    window.scrollTo(x, y);
    fillTestAddress();
    document.dispatchEvent(new CustomEvent("desk:updated"));
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) { return; }
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { event.preventDefault(); return; }
    if (form.method.toLowerCase() !== "post" || form.hasAttribute("data-plain") || !window.fetch) { return; }
    event.preventDefault();
    if (busy) { return; }
    busy = true;
    var to = form.querySelector("input[name=to]");
    if (to && window.localStorage) { window.localStorage.setItem("digestbot-test-to", to.value); }
    var buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin",
                         headers: { "Accept": "text/html" } })
      .then(function (response) {
        return response.text().then(function (text) { swapMain(text, response.url); });
      })
      .catch(function () { form.submit(); })  // the network failed: the plain way
      .finally(function () { busy = false; buttons.forEach(function (b) { b.disabled = false; }); });
  });

  function fillTestAddress() {
    var to = document.querySelector("form.testsend input[name=to]");
    var last = window.localStorage && window.localStorage.getItem("digestbot-test-to");
    if (to && last && !to.value) { to.value = last; }
  }

  document.addEventListener("DOMContentLoaded", fillTestAddress);
  document.documentElement.classList.add("js");
})();
