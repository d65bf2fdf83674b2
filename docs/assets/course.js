/* The course's widgets: knowledge checks and predict-then-measure checks, the progress line, and
   the landing page's progress per lesson with "continue where you left off".
   Answers are kept in localStorage under the site's base path, the page and the check id; only
   the first answer of each check counts. A lesson page also notes itself as the last one read.
   Folded code blocks are fetched when unfolded, and a calculator's script (calculator.js) when
   its form comes near the screen or is touched.
   Without this script the checks stay readable: the question, the options and, in a collapsed
   block, the answer; the landing page lists the lessons without the reader's progress; a folded
   code block is a link that opens the code. */
(function () {
  "use strict";
  var PREFIX = "course.checks";
  var LETTERS = "ABCDEFGHIJ";

  /* The site's base path, computed once (this script is loaded once, even with instant navigation). */
  var BASE = (function () {
    try {
      var config = JSON.parse(document.getElementById("__config").textContent);
      return new URL(config.base, location.href).pathname;
    } catch (e) {
      return "/";
    }
  })();

  function pageKey() {
    var path = location.pathname;
    if (path.indexOf(BASE) === 0) path = path.slice(BASE.length);
    return path.replace(/index\.html$/, "") || "/";
  }
  function storageKey(id, page) { return PREFIX + ":" + BASE + ":" + (page || pageKey()) + ":" + id; }
  function load(id, page) {
    try { return JSON.parse(localStorage.getItem(storageKey(id, page))); } catch (e) { return null; }
  }
  var LAST = "course.last:" + BASE;
  function save(id, value) {
    try { localStorage.setItem(storageKey(id), JSON.stringify(value)); } catch (e) { /* private mode */ }
  }
  function forget(id) {
    try { localStorage.removeItem(storageKey(id)); } catch (e) { /* private mode */ }
  }

  function parts(box) {
    var form = box.querySelector(".course-check__form");
    return {
      form: form,
      inputs: Array.prototype.slice.call(form.querySelectorAll("input[type=radio]")),
      options: Array.prototype.slice.call(form.querySelectorAll(".course-check__option")),
      measured: form.querySelector(".course-check__measured"),
      submit: form.querySelector("button[type=submit]"),
      again: form.querySelector(".course-check__again"),
      result: form.querySelector(".course-check__result"),
      right: form.getAttribute("data-right")
    };
  }

  function reveal(box, pick, how) {
    var p = parts(box);
    var right = pick === p.right;
    p.inputs.forEach(function (input) {
      input.checked = input.value === pick;
      input.disabled = true;
    });
    p.options.forEach(function (option) {
      var index = option.getAttribute("data-option");
      var isRight = index === p.right;
      var mine = index === pick;
      option.classList.toggle("course-check__option--right", isRight);
      option.classList.toggle("course-check__option--wrong", mine && !isRight);
      var verdict = option.querySelector(".course-check__verdict");
      verdict.textContent = isRight ? (mine ? "✓ Your answer, and right." : "✓ The right answer.")
        : (mine ? "✗ Your answer, not right." : "✗ Not right.");
      option.querySelector(".course-check__why").hidden = false;
    });
    if (p.measured) p.measured.hidden = false;
    var text = right ? "Right." : "Not right: the answer is " + LETTERS[Number(p.right)] + ".";
    if (p.measured) text += " " + p.measured.textContent.trim();
    if (how === "restored") text = "You answered this before. " + text;
    if (how === "again") text += " Only your first answer counts toward your progress.";
    p.result.textContent = text;
    p.submit.hidden = true;
    p.again.hidden = false;
    box.classList.add("course-check--answered");
  }

  function unlock(box) {
    var p = parts(box);
    p.inputs.forEach(function (input) { input.disabled = false; input.checked = false; });
    p.options.forEach(function (option) {
      option.classList.remove("course-check__option--right", "course-check__option--wrong");
      option.querySelector(".course-check__why").hidden = true;
    });
    if (p.measured) p.measured.hidden = true;
    p.result.textContent = "";
    p.submit.hidden = false;
    p.again.hidden = true;
    box.classList.remove("course-check--answered");
    if (p.inputs.length) p.inputs[0].focus();
  }

  function updateProgress() {
    var line = document.querySelector("[data-course-progress]");
    if (!line) return;
    var total = Number(line.getAttribute("data-total"));
    var right = 0;
    document.querySelectorAll(".course-check").forEach(function (box) {
      var first = load(box.getAttribute("data-check"));
      if (first && first.right) right += 1;
    });
    var noun = total === 1 ? "check" : "checks";
    line.querySelector(".course-progress__count").textContent =
      right + " of " + total + " " + noun + " answered right";
  }

  function setup(box) {
    if (box.getAttribute("data-ready")) return;
    box.setAttribute("data-ready", "1");
    var id = box.getAttribute("data-check");
    var p = parts(box);
    box.querySelector(".course-check__answer").hidden = true;
    p.form.addEventListener("submit", function (event) {
      event.preventDefault();
      var picked = p.form.querySelector("input[type=radio]:checked");
      if (!picked) {
        p.result.textContent = "Pick one answer first.";
        return;
      }
      var first = load(id);
      if (!first) save(id, { pick: picked.value, right: picked.value === p.right });
      reveal(box, picked.value, first ? "again" : "first");
      updateProgress();
    });
    p.again.addEventListener("click", function () { unlock(box); });
    var stored = load(id);
    if (stored) reveal(box, String(stored.pick), "restored");
  }

  /* Material leaves its search dialog and its page-loading bar without a name (axe: serious). */
  function nameMaterialWidgets() {
    var named = [[".md-search[role=dialog]", "Search"], [".md-progress[role=progressbar]", "Loading the page"]];
    named.forEach(function (pair) {
      var el = document.querySelector(pair[0]);
      if (el && !el.getAttribute("aria-label")) el.setAttribute("aria-label", pair[1]);
    });
  }

  /* A lesson page notes itself as the one to continue from. */
  function noteLastLesson() {
    var header = document.querySelector(".course-lesson-header[data-lesson]");
    if (!header) return;
    var title = header.querySelector("h1");
    try {
      localStorage.setItem(LAST, JSON.stringify({ page: pageKey(), title: title ? title.textContent : "" }));
    } catch (e) { /* private mode */ }
  }

  /* The landing page: each lesson's progress, and the way back to the last lesson read. */
  function showCourseProgress() {
    var lessons = {};
    document.querySelectorAll("[data-course-lesson]").forEach(function (item) {
      var page = item.getAttribute("data-page");
      var ids = (item.getAttribute("data-checks") || "").split(" ").filter(Boolean);
      var answered = 0, right = 0, firstOpen = null;
      ids.forEach(function (id) {
        var first = load(id, page);
        if (first) { answered += 1; if (first.right) right += 1; } else if (firstOpen === null) firstOpen = id;
      });
      var title = item.querySelector(".course-lesson__title a");
      lessons[page] = { title: title ? title.textContent : page, answered: answered, open: firstOpen };
      var line = item.querySelector("[data-course-lesson-progress]");
      if (!line) return;
      var noun = ids.length === 1 ? "check" : "checks";
      line.textContent = answered === 0 ? "Not started: " + ids.length + " " + noun + " to answer."
        : answered + " of " + ids.length + " " + noun + " answered, " + right + " right.";
      line.hidden = false;
    });
    var cont = document.querySelector("[data-course-continue]");
    if (!cont) return;
    var last = null;
    try { last = JSON.parse(localStorage.getItem(LAST)); } catch (e) { last = null; }
    var lesson = last && lessons[last.page];
    if (!lesson) { cont.hidden = true; return; }
    var link = cont.querySelector("a");
    link.textContent = "Continue where you left off: " + lesson.title;
    link.setAttribute("href", BASE + last.page + (lesson.answered && lesson.open ? "#check-" + lesson.open : ""));
    cont.hidden = false;
  }

  /* A folded code block comes from its own file when it is unfolded (course/pages/deferred.py):
     the link in its place is replaced by the block, with Material's copy button. */
  var fetched = 0;
  function unfold(holder) {
    if (holder.getAttribute("data-state") || holder.closest("details:not([open])")) return;
    var link = holder.querySelector("a");
    if (!link) return;
    holder.setAttribute("data-state", "loading");
    holder.setAttribute("aria-busy", "true");
    fetch(link.href).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.text();
    }).then(function (text) {
      var box = document.createElement("div");
      box.innerHTML = text;
      var block = box.firstElementChild;
      var pre = block ? block.querySelector("pre") : null;
      var code = pre ? pre.querySelector("code") : null;
      if (!code) throw new Error("no code in " + link.href);
      fetched += 1;
      pre.id = "__course_code_" + fetched;
      code.setAttribute("tabindex", "0");
      var known = document.querySelector(".md-code__button[data-md-type=copy]");
      var nav = document.createElement("nav");
      nav.className = "md-code__nav";
      var button = document.createElement("button");
      button.className = "md-code__button";
      button.title = known ? known.title : "Copy to clipboard";
      button.setAttribute("data-clipboard-target", "#" + pre.id + " > code");
      button.setAttribute("data-md-type", "copy");
      nav.appendChild(button);
      pre.insertBefore(nav, code);
      holder.replaceWith(block);
    }).catch(function () {
      holder.removeAttribute("data-state");
      holder.removeAttribute("aria-busy");
      link.textContent += " (it could not be shown here: this link opens it)";
    });
  }
  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (details && details.open && details.querySelectorAll) {
      details.querySelectorAll(".course-deferred").forEach(unfold);
    }
  }, true);

  /* A calculator (course/pages/calculators/) costs nothing until it is used: the page holds a
     slot; its form (a file beside the page) and its script come when the slot nears the screen
     or its button is pressed, the script once for the whole visit. */
  var CALCULATOR_SRC = (function () {
    var script = document.currentScript;
    return script && script.src ? new URL("calculator.js", script.src).href : null;
  })();
  var calculatorScript = null;
  function calculatorReady() {
    if (!calculatorScript) {
      calculatorScript = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = CALCULATOR_SRC;
        tag.async = true;
        tag.onload = function () { resolve(window.CourseCalculator); };
        tag.onerror = function () { calculatorScript = null; reject(new Error("calculator.js")); };
        document.body.appendChild(tag);
      });
    }
    return calculatorScript;
  }
  function openCalculator(slot, focus) {
    // a press while the form is already coming (the reader scrolled near it) still moves focus
    if (focus) slot.setAttribute("data-focus", "1");
    if (slot.getAttribute("data-state") || !CALCULATOR_SRC) return;
    slot.setAttribute("data-state", "loading");
    slot.setAttribute("aria-busy", "true");
    var src = new URL(slot.getAttribute("data-calculator-src"), location.href).href;
    var form = fetch(src).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.text();
    });
    Promise.all([form, calculatorReady()]).then(function (got) {
      if (!slot.isConnected) return;  // the reader has moved on to another page
      var box = document.createElement("div");
      box.innerHTML = got[0];
      var node = box.querySelector("form[data-calculator]");
      if (!node) throw new Error("no form in " + src);
      // the form came by itself while the reader's focus was on its button (tabbing to the
      // button brings it near the screen): the focus goes into the form, not lost with the button
      var held = slot.contains(document.activeElement);
      slot.replaceWith(node);
      got[1].mount(node);
      var first = node.querySelector("input, select, textarea");
      if ((slot.getAttribute("data-focus") || held) && first) first.focus();
    }).catch(function () {
      slot.removeAttribute("data-state");
      slot.removeAttribute("aria-busy");
      var note = slot.querySelector(".course-calc__failed") || document.createElement("p");
      note.className = "course-calc__failed";
      note.textContent = "The calculator could not be loaded; the table below gives its worked rows.";
      slot.appendChild(note);
    });
  }
  function watchCalculators() {
    document.querySelectorAll(".course-calc__slot:not([data-watched])").forEach(function (slot) {
      slot.setAttribute("data-watched", "1");
      var button = slot.querySelector("[data-action=open-calculator]");
      if (button) button.addEventListener("click", function () { openCalculator(slot, true); });
      if (!("IntersectionObserver" in window)) return;
      var near = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { near.disconnect(); openCalculator(slot, false); }
      }, { rootMargin: "600px 0px" });
      near.observe(slot);
    });
  }

  function init() {
    document.querySelectorAll(".course-deferred").forEach(unfold);
    nameMaterialWidgets();
    noteLastLesson();
    showCourseProgress();
    document.querySelectorAll(".course-check").forEach(setup);
    var reset = document.querySelector(".course-progress__reset");
    if (reset && !reset.getAttribute("data-ready")) {
      reset.setAttribute("data-ready", "1");
      reset.addEventListener("click", function () {
        document.querySelectorAll(".course-check").forEach(function (box) {
          forget(box.getAttribute("data-check"));
          unlock(box);
        });
        updateProgress();
        reset.focus();
      });
    }
    updateProgress();
    watchCalculators();
  }

  if (window.document$ && typeof window.document$.subscribe === "function") {
    window.document$.subscribe(init);
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
