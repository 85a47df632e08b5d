// pitstop's dashboard. Each page polls its JSON answer every 2 seconds and
// redraws when it changes. Everything from the cluster is put on the page
// as text (el() below appends strings as text nodes), never as HTML.
"use strict";

const pollInterval = 2000;
// Relative times ("5m ago") are redrawn at least this often, even when
// nothing else changes.
const redrawAtLeastEvery = 30000;

const states = ["operational", "maintenance-required", "in-maintenance"];

// el makes an element: attrs are attributes (class, href, data-*), children
// are elements or strings; null, undefined and false children are skipped.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function nodeLink(name) {
  return el("a", { href: "/nodes/" + encodeURIComponent(name), class: "node" }, name);
}

function stateBadge(state) {
  return el("span", { class: "state state-" + state }, state);
}

// passMark says pass, fail or error in words; the colour only repeats it.
function passMark(passed, error) {
  const word = error ? "error" : passed ? "pass" : "fail";
  return el("span", { class: "mark mark-" + word }, word.toUpperCase());
}

function duration(ms) {
  let s = Math.round(Math.abs(ms) / 1000);
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (s >= size || (unit === "s" && parts.length === 0)) {
      parts.push(Math.floor(s / size) + unit);
      s %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}

// when shows a time as the reader's local time, with how far it is from
// now (the answer's own time, so that it agrees with the server).
function when(t, now) {
  const d = new Date(t), ms = d - new Date(now);
  const rel = ms < 0 ? duration(ms) + " ago" : "in " + duration(ms);
  return el("time", { datetime: t, title: d.toISOString() }, d.toLocaleString() + " (" + rel + ")");
}

function nextChange(t, now) {
  return el("p", { class: "next-change" }, t
    ? ["Next change by itself: ", when(t, now), "."]
    : "Next change: only when something in the cluster changes.");
}

function table(headers, rows, attrs) {
  return el("table", attrs,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, rows));
}

// ---- fleet page ----

function renderFleet(f) {
  const profiled = states.reduce((n, s) => n + (f.states[s] || 0), 0);
  const counts = states.map((s) =>
    el("li", { "data-state": s }, el("span", { class: "count" }, f.states[s] || 0), " ", stateBadge(s)));
  counts.push(el("li", { "data-state": "unprofiled" }, el("span", { class: "count" }, (f.unprofiled || []).length), " in no profile"));
  const out = [
    el("section", { id: "summary" },
      el("h2", {}, f.nodes + " nodes"),
      el("ul", { class: "counts" }, counts),
      el("p", { class: "hint" }, profiled + " nodes are in a profile; each counts once, in its most severe state."),
      nextChange(f.nextChange, f.generated)),
  ];
  if (f.clusterAPI) {
    out.push(el("p", { id: "clusters-link" }, "Cluster API: the Machines of the workload clusters and their nodes are on ",
      el("a", { href: "/clusters" }, "the clusters page"), "."));
  }
  for (const p of f.profiles || []) out.push(renderProfile(p, f.generated));
  out.push(renderDrains(f.maintenances));
  if (f.unprofiled && f.unprofiled.length) {
    out.push(el("section", { id: "unprofiled" }, el("h2", {}, "Nodes in no profile"),
      nodeList(f.unprofiled, "unprofiled")));
  }
  if (f.unreadable && f.unreadable.length) {
    out.push(el("section", { id: "unreadable" }, el("h2", {}, "Nodes whose record cannot be read"),
      el("ul", {}, f.unreadable.map((u) => el("li", {}, nodeLink(u.node), ": ", u.error)))));
  }
  return out;
}

// nodeList lists node links; a long list folds away, keyed so that it stays
// open across redraws.
function nodeList(names, key) {
  const list = el("ul", { class: "nodes" }, names.map((n) => el("li", {}, nodeLink(n))));
  if (names.length <= 12) return list;
  return el("details", { "data-key": key }, el("summary", {}, "show " + names.length + " nodes"), list);
}

function renderProfile(p, now) {
  const byState = {};
  for (const n of p.nodes || []) (byState[n.state] = byState[n.state] || []).push(n);
  const rows = states.map((s) => {
    const nodes = byState[s] || [];
    let list;
    if (s === "operational") {
      list = nodeList(nodes.map((n) => n.node), "profile/" + p.profile + "/" + s);
    } else {
      list = el("ul", { class: "nodes" }, nodes.map((n) =>
        el("li", {}, nodeLink(n.node), el("span", { class: "since" }, " for " + duration(new Date(now) - new Date(n.since))))));
    }
    return el("tr", { "data-state": s }, el("th", { scope: "row" }, stateBadge(s)), el("td", { class: "count" }, nodes.length), el("td", {}, list));
  });
  return el("section", { class: "profile", "data-profile": p.profile },
    el("h2", {}, "Profile ", el("code", {}, p.profile), " ", el("a", { href: "/api/v1/profiles/" + encodeURIComponent(p.profile), class: "json" }, "JSON")),
    p.error && el("p", { class: "error" }, p.error),
    table(["State", "Nodes", ""], rows, { class: "states" }),
    renderBudgets(p.budgets || []),
    renderWindows(p.windows || [], now));
}

function renderBudgets(budgets) {
  if (!budgets.length) return null;
  return el("div", { class: "budgets" }, el("h3", {}, "Budgets"), table(["Check", "Counts", "Used"], budgets.map((b) => {
    const scope = (b.profileScoped ? "this profile's nodes" : "all nodes") +
      (!b.groupBy ? "" : b.groupBy.includes(",") ? ", " + b.group.split(",").join(", ") :
        b.group ? ", " + b.groupBy + "=" + b.group : ", without label " + b.groupBy);
    const full = b.used >= b.allowed;
    return el("tr", { "data-check": b.check },
      el("td", {}, el("code", {}, b.check)), el("td", {}, scope),
      el("td", { class: full ? "full" : "free" }, b.used + " of " + b.allowed + " slots taken" + (full ? " (full)" : "")));
  })));
}

function renderWindows(windows, now) {
  if (!windows.length) return null;
  return el("div", { class: "windows" }, el("h3", {}, "Time windows and freezes"), table(["Check", "Now", "Why", "Changes"], windows.map((w) => {
    let word = w.plugin === "freeze" ? (w.passed ? "no freeze" : "frozen") : (w.passed ? "open" : "shut");
    if (w.error) word = "error";
    return el("tr", { "data-check": w.name },
      el("td", {}, el("code", {}, w.name), " ", el("span", { class: "plugin" }, w.plugin)),
      el("td", {}, el("span", { class: "mark mark-" + (w.error ? "error" : w.passed ? "pass" : "fail") }, word)),
      el("td", {}, w.error || w.reason),
      el("td", {}, w.nextChange ? when(w.nextChange, now) : "never by itself"));
  })));
}

function renderDrains(maintenances) {
  const section = el("section", { id: "drains" }, el("h2", {}, "Drains (NodeMaintenances)"));
  if (!maintenances.length) {
    section.append(el("p", {}, "No NodeMaintenance exists: no node is being drained or held drained."));
    return section;
  }
  section.append(table(["Node", "NodeMaintenance", "Phase", "Drained", "Waiting for"], maintenances.map((m) =>
    el("tr", { "data-node": m.node },
      el("td", {}, nodeLink(m.node)),
      el("td", {}, m.name),
      el("td", {}, m.phase || "-", m.deleting ? " (restoring the node)" : ""),
      el("td", {}, progress(m)),
      el("td", {}, blockerList(m))))));
  return section;
}

function progress(m) {
  return el("span", { class: "progress" },
    el("progress", { max: 100, value: m.drainProgress }), " " + m.drainProgress + "%, " + m.pendingPods + " pods to go");
}

function blockerList(m) {
  const items = (m.blockers || []).map((b) => el("li", {},
    "pod ", el("code", {}, b.pod.namespace + "/" + b.pod.name),
    b.podDisruptionBudget ? [" (PodDisruptionBudget ", el("code", {}, b.podDisruptionBudget), ")"] : "",
    b.message ? ": " + b.message : ""));
  if (m.lastError) items.push(el("li", { class: "error" }, "last error: " + m.lastError));
  return items.length ? el("ul", { class: "blockers" }, items) : "-";
}

// ---- node page ----

function renderNode(r) {
  const out = [el("section", { id: "node" },
    el("h2", {}, "Node ", el("code", {}, r.node), " ", r.state === "-" ? "(no state yet)" : stateBadge(r.state),
      r.cordoned ? el("span", { class: "cordoned" }, " cordoned") : "",
      " ", el("a", { href: "/api/v1/nodes/" + encodeURIComponent(r.node), class: "json" }, "JSON")),
    !r.profiles.length && el("p", {}, "No MaintenanceProfile selects this node."),
    nextChange(r.nextChange, r.generated))];
  for (const e of r.profiles) out.push(renderEvaluation(e, r.generated));
  for (const e of r.scheduledEvents || []) out.push(renderScheduledEvent(e, r.generated));
  for (const m of r.maintenances || []) out.push(renderMaintenance(m));
  out.push(renderEvents(r));
  return out;
}

function renderEvaluation(e, now) {
  const section = el("section", { class: "profile", "data-profile": e.profile },
    el("h2", {}, "Profile ", el("code", {}, e.profile), ": ", stateBadge(e.record.current), " since ", when(e.record.since, now)),
    e.error && el("p", { class: "error" }, "Cannot evaluate: " + e.error),
    // The answer is the engine's last evaluation, not one made for this page.
    e.evaluated && el("p", { class: "evaluated" }, "Evaluated by the engine ", when(e.evaluated, now), "."),
    e.recorded && el("p", { class: "evaluated recorded" },
      "This replica has not evaluated the node (it is on standby, or has just started): each check's result is the one the engine recorded on the node, without its reason."),
    e.record.failures > 0 && el("p", { class: "error" }, e.record.failures + " failed attempts in a row; last: " + e.record.lastError));
  // engine.Decision has no JSON tags: its keys are its Go field names, as
  // in `pitstop explain -o json`.
  const evaluations = (e.decision && e.decision.evaluations) || [];
  if (e.decision && e.decision.entering) section.append(el("p", { class: "entering" }, e.decision.entering));
  else if (!evaluations.length && !e.error) section.append(el("p", {}, "No transition leaves " + e.record.current + "."));
  for (const t of evaluations) {
    let verdict = "waits";
    if (t.passed && t.blocked) verdict = "passes, but blocked";
    else if (t.index === e.decision.take) verdict = "passes: taken on the manager's next pass";
    else if (t.passed) verdict = "passes (an earlier transition wins)";
    section.append(el("div", { class: "transition", "data-next": t.next },
      el("h3", {}, "→ ", stateBadge(t.next), " when ", el("code", {}, t.check || "(always)"), ": ", el("span", { class: "verdict" }, verdict)),
      el("ul", { class: "checks" }, (t.checks || []).map((c) =>
        el("li", { class: "check", "data-check": c.name, "data-result": c.error ? "error" : c.passed ? "pass" : "fail" },
          passMark(c.passed, c.error), " ", el("code", {}, c.name), ": ", c.error || c.reason || "",
          c.nextChange ? el("span", { class: "since" }, " (can change ", when(c.nextChange, now), ")") : ""))),
      t.blocked && el("p", { class: "blocked" }, "Blocked: " + t.blocked)));
  }
  return section;
}

// renderScheduledEvent shows a cloud event scheduled for the node's
// instance (a MachineMaintenance) and pitstop's plan for it.
function renderScheduledEvent(e, now) {
  return el("section", { class: "scheduled-event", "data-object": e.object },
    el("h2", {}, "Scheduled event ", el("code", {}, e.code), " ", e.notBefore ? when(e.notBefore, now) : "at an unknown time", ": ", e.phase || "-"),
    el("p", {}, "MachineMaintenance ", el("code", {}, e.object), e.description ? ": " + e.description : ""),
    e.latestSafeStart && el("p", { class: "start-by" }, "Latest safe start ", when(e.latestSafeStart, now), "."),
    e.plan && el("p", { class: "plan" }, "Plan: " + e.plan),
    e.action && el("p", { class: "action" }, "Action: " + e.action),
    e.atRisk && el("p", { class: "error" }, "At risk: " + e.atRisk));
}

function renderMaintenance(m) {
  const blockers = (m.blockers || []).map((b) => el("tr", {},
    el("td", {}, el("code", {}, b.pod.namespace + "/" + b.pod.name)),
    el("td", {}, b.podDisruptionBudget ? el("code", {}, b.podDisruptionBudget) : "-"),
    el("td", {}, b.reason), el("td", {}, b.message || "")));
  return el("section", { class: "drain", "data-maintenance": m.name },
    el("h2", {}, "Drain (NodeMaintenance ", el("code", {}, m.name), "): ", m.phase || "-", m.deleting ? ", being deleted (restoring the node)" : ""),
    el("p", {}, progress(m)),
    m.reason && el("p", {}, "Reason: " + m.reason),
    m.drained && m.drained.status !== "True" && el("p", {}, m.drained.reason + ": " + m.drained.message),
    blockers.length > 0 && el("div", { class: "blockers" }, el("h3", {}, "Waiting for"), table(["Pod", "PodDisruptionBudget", "Reason", "Message"], blockers)),
    m.lastError && el("p", { class: "error" }, "Last error: " + m.lastError));
}

function renderEvents(r) {
  const section = el("section", { id: "events" }, el("h2", {}, "Recent events"));
  if (r.eventsError) section.append(el("p", { class: "error" }, "Cannot be read: " + r.eventsError));
  const events = r.events || [];
  if (!events.length) {
    if (!r.eventsError) section.append(el("p", {}, "None."));
    return section;
  }
  section.append(table(["Time", "Type", "Reason", "Note"], events.map((e) =>
    el("tr", { class: "event-" + e.type },
      el("td", {}, when(e.time, r.generated)), el("td", {}, e.type), el("td", {}, e.reason),
      el("td", {}, e.note, e.count > 1 ? " (×" + e.count + ")" : "")))));
  return section;
}

// ---- clusters page (Cluster API) ----

function renderClusters(c) {
  const clusters = c.clusters || [];
  if (!clusters.length) {
    return [el("p", {}, "No Machine is opted in (label runtime-extension-maintenance-controller.cloud.sap/enabled=true).")];
  }
  return clusters.map((cl) => el("section", { class: "cluster", "data-cluster": cl.cluster },
    el("h2", {}, "Cluster ", el("code", {}, cl.cluster)),
    cl.error && el("p", { class: "error" }, "Not read: " + cl.error),
    table(["Machine", "Phase", "Node", "Node state", "Deletion", "Maintenance", "Waiting for"], cl.machines.map((m) =>
      el("tr", { "data-machine": m.machine },
        el("td", {}, m.machine), el("td", {}, m.phase || "-"), el("td", {}, m.node || "no node yet"),
        el("td", {}, m.state ? stateBadge(m.state) : "-"),
        el("td", {}, m.deleting ? (m.held ? "held until the node approves" : "going on") : (m.held ? "would be held" : "not held")),
        el("td", {}, m.maintenance || "-"),
        el("td", {}, m.unreachable && el("p", { class: "error" }, m.unreachable),
          (m.waiting || []).length ? el("ul", {}, m.waiting.map((w) => el("li", {}, w))) : null))))));
}

// ---- polling ----

// redraw replaces the page's content, keeping folded lists open that were.
function redraw(content) {
  const main = document.getElementById("content");
  const open = new Set([...main.querySelectorAll("details[open]")].map((d) => d.dataset.key));
  main.replaceChildren(...content.filter(Boolean));
  for (const d of main.querySelectorAll("details")) if (open.has(d.dataset.key)) d.open = true;
}

function setStatus(text, stale) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.classList.toggle("stale", stale);
}

async function poll(url, render) {
  let last = "", lastDraw = 0, lastGood = null;
  for (;;) {
    try {
      const resp = await fetch(url, { cache: "no-store" });
      const body = await resp.json().catch(() => ({ error: resp.status + " " + resp.statusText }));
      if (!resp.ok) throw new Error(body.error || resp.status + " " + resp.statusText);
      const key = JSON.stringify({ ...body, generated: null });
      if (key !== last || Date.now() - lastDraw > redrawAtLeastEvery) {
        redraw(render(body));
        last = key;
        lastDraw = Date.now();
      }
      lastGood = new Date(body.generated);
      setStatus("Updated " + lastGood.toLocaleTimeString() + "; refreshes every " + pollInterval / 1000 + " s.", false);
    } catch (err) {
      if (!lastGood) redraw([el("p", { class: "error", id: "load-error" }, err.message)]);
      setStatus((lastGood ? "Showing the answer of " + lastGood.toLocaleTimeString() + ". " : "") +
        "Cannot read it now: " + err.message + ". Retrying every " + pollInterval / 1000 + " s.", true);
    }
    await new Promise((resolve) => setTimeout(resolve, pollInterval));
  }
}

function start() {
  if (document.body.dataset.page === "node") {
    const name = decodeURIComponent(location.pathname.slice("/nodes/".length));
    document.title = "pitstop · " + name;
    poll("/api/v1/nodes/" + encodeURIComponent(name), renderNode);
  } else if (document.body.dataset.page === "clusters") {
    poll("/api/v1/clusters", renderClusters);
  } else {
    poll("/api/v1/fleet", renderFleet);
  }
}

start();
