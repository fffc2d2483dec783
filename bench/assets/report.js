// report.html's trace viewer (inlined by bench/html.py). It builds every node with textContent,
// never innerHTML, so corpus and model text stays text whatever it holds.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("trace-data").textContent);
  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function fmt(x, d) { return x === null || x === undefined ? "" : Number(x).toFixed(d); }
  var probeSel = document.getElementById("probe-select");
  var stratSel = document.getElementById("strategy-select");
  var out = document.getElementById("trace-view");
  data.probes.forEach(function (p) {
    var o = el("option", null, p.id + ": " + p.question);
    o.value = p.id;
    probeSel.appendChild(o);
  });
  var all = el("option", null, "all strategies");
  all.value = "";
  stratSel.appendChild(all);
  data.order.forEach(function (s) { var o = el("option", null, s); o.value = s; stratSel.appendChild(o); });
  function tokens(call, theta) {
    var box = el("div", "tok");
    call.tokens.forEach(function (t, i) {
      var p = call.probs ? call.probs[i] : null;
      if (p !== null && theta !== null && theta !== undefined && p <= theta) {
        var m = el("span", "low", t);
        m.title = "p = " + p;
        m.appendChild(el("sub", null, fmt(p, 2)));
        box.appendChild(m);
      } else {
        box.appendChild(document.createTextNode(t));
      }
    });
    return box;
  }
  function doc(id, gold) {
    var d = data.docs[id] || ["(not in corpus)", ""];
    var det = el("details", "doc");
    var sum = el("summary");
    sum.appendChild(el("span", gold.indexOf(id) >= 0 ? "gold" : null, d[0]));
    sum.appendChild(el("span", "muted", " [" + id + "]" + (gold.indexOf(id) >= 0 ? " gold" : "")));
    det.appendChild(sum);
    det.appendChild(el("div", null, d[1]));
    return det;
  }
  function trace(t, probe) {
    var theta = data.thetas[t.strategy];
    var box = el("details", "trace");
    var ok = t.em !== null && t.em > 0;
    var sum = el("summary", null, t.strategy + " \u2014 ");
    sum.appendChild(el("span", ok ? "right" : "wrong", (t.answer === null ? "(no answer)" : t.answer)));
    var calls = t.steps.reduce(function (a, s) { return a + s.calls.length; }, 0);
    sum.appendChild(el("span", "muted", "  EM " + fmt(t.em, 0) + ", F1 " + fmt(t.f1, 2) + ", " + calls +
      " LM calls, " + fmt(t.seconds, 2) + " s, stop: " + t.stop));
    box.appendChild(sum);
    if (t.error) box.appendChild(el("p", "wrong", "error: " + t.error));
    if (theta !== null && theta !== undefined) box.appendChild(el("p", "muted", "theta " + theta + ": tokens at or below it are highlighted"));
    t.steps.forEach(function (s, i) {
      var st = el("div", "step");
      st.appendChild(el("div", null, "step " + (i + 1) + ": " + s.text));
      s.retrievals.forEach(function (r) {
        var rd = el("div");
        rd.appendChild(el("span", "reason", r.reason));
        rd.appendChild(document.createTextNode(" query: " + r.query));
        if (r.min_p !== null) rd.appendChild(el("span", "muted", "  (min p " + r.min_p + ")"));
        if (r.span) rd.appendChild(el("span", "muted", "  span: " + r.span));
        st.appendChild(rd);
        r.docs.forEach(function (id) { st.appendChild(doc(id, probe.gold)); });
      });
      s.calls.forEach(function (c) {
        st.appendChild(el("div", "muted", c.purpose + ": " + c.prompt + " prompt tokens (" + c.evaluated +
          " evaluated), " + c.completion + " generated, " + fmt(c.seconds, 3) + " s" + (c.cached ? ", cached" : "")));
        st.appendChild(tokens(c, theta));
      });
      box.appendChild(st);
    });
    var o = el("details");
    o.appendChild(el("summary", "muted", "full output"));
    o.appendChild(el("div", "tok", t.output));
    box.appendChild(o);
    return box;
  }
  function show() {
    var probe = data.probes.filter(function (p) { return p.id === probeSel.value; })[0];
    out.replaceChildren();
    if (!probe) { out.appendChild(el("p", "muted", "No finished probe yet.")); return; }
    out.appendChild(el("p", null, "Question: " + probe.question));
    out.appendChild(el("p", "muted", "Gold answer (" + probe.answer_type + "): " + probe.answers.join(" | ")));
    var shown = data.traces.filter(function (t) {
      return t.probe === probe.id && (!stratSel.value || t.strategy === stratSel.value);
    });
    shown.sort(function (a, b) { return data.order.indexOf(a.strategy) - data.order.indexOf(b.strategy); });
    shown.forEach(function (t, i) { var b = trace(t, probe); if (i === 0 || stratSel.value) b.open = true; out.appendChild(b); });
  }
  probeSel.addEventListener("change", show);
  stratSel.addEventListener("change", show);
  show();
})();
