// handoff's HTML report (sim/src/timed/html.rs): draws the run in #run-data.
// No libraries, no network: SVG built by hand. The browser test (sim/tests/html_report.rs) fails
// on any script error and looks for the ids and classes named in html.rs.
"use strict";
window.addEventListener("error", function (e) {
  document.body.setAttribute("data-script-error", String(e.message || e));
});
(function () {
  const data = JSON.parse(document.getElementById("run-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const main = document.getElementById("report");
  const W = 1270, LEFT = 150, RIGHT = 20;
  const end = Math.max(data.end_ms, 1);
  const x = (ms) => LEFT + (W - LEFT - RIGHT) * Math.min(ms, end) / end;
  const PALETTE = ["#2f6fb3", "#1b9e77", "#7570b3", "#d95f02", "#66a61e", "#a6761d", "#e7298a", "#17becf", "#8c564b", "#bcbd22"];

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svg(tag, attrs, parent) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (parent) parent.appendChild(node);
    return node;
  }
  // A legend entry: the series' colour and its name.
  function legendItem(legend, name, stroke) {
    const item = el("span");
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = stroke;
    item.appendChild(swatch);
    item.appendChild(document.createTextNode(name));
    legend.appendChild(item);
  }
  function title(node, text) { svg("title", {}, node).textContent = text; return node; }
  // Simulated time as the text report prints it: t=12.117s.
  function at(ms) { return "t=" + Math.floor(ms / 1000) + "." + String(ms % 1000).padStart(3, "0") + "s"; }
  // An LSN as PostgreSQL prints it: 0/16B3748.
  function lsn(v) {
    if (v === null || v === undefined) return "NULL";
    const hi = Math.floor(v / 4294967296), lo = v % 4294967296;
    return hi.toString(16).toUpperCase() + "/" + lo.toString(16).toUpperCase();
  }
  function bytes(n) {
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + " GB";
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MB";
    if (n >= 1024) return (n / 1024).toFixed(1) + " kB";
    return n + " B";
  }
  function section(heading, hint) {
    main.appendChild(el("h2", {}, heading));
    if (hint) main.appendChild(el("p", { class: "hint" }, hint));
  }
  function timeAxis(root, y, height) {
    const axis = svg("g", { class: "axis" }, root);
    const step = niceStep(end / 10);
    for (let t = 0; t <= end; t += step) {
      svg("line", { class: "grid", x1: x(t), x2: x(t), y1: 0, y2: y }, axis);
      svg("text", { x: x(t), y: y + 14, "text-anchor": "middle" }, axis).textContent = at(t);
    }
    svg("line", { x1: LEFT, x2: W - RIGHT, y1: y, y2: y }, axis);
    return height;
  }
  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }
  // Faults, operator actions and findings as vertical marks over a chart of height h.
  function marks(root, top, h) {
    for (const fault of data.faults) {
      const g = svg("g", { class: fault.operator ? "operator-marker" : "fault-marker", "data-event": fault.event }, root);
      svg("line", { x1: x(fault.at_ms), x2: x(fault.at_ms), y1: top, y2: top + h }, g);
      svg("path", { d: `M${x(fault.at_ms) - 5},${top} l10,0 l-5,8 z` }, g);
      title(g, at(fault.at_ms) + "  " + fault.text);
      g.addEventListener("click", () => pick(fault.event));
      g.style.cursor = "pointer";
    }
    data.findings.forEach((finding) => {
      const g = svg("g", { class: "finding-marker" }, root);
      svg("line", { x1: x(finding.at_ms), x2: x(finding.at_ms), y1: top, y2: top + h }, g);
      svg("path", { d: `M${x(finding.at_ms)},${top + h - 10} l5,5 l-5,5 l-5,-5 z` }, g);
      title(g, finding.text);
    });
  }

  // --- Header and verdict ----------------------------------------------------------------
  main.appendChild(el("h1", {}, data.name));
  main.appendChild(el("p", { class: "lead" }, data.description));
  main.appendChild(el("p", { class: "hint mono" },
    `${data.scenario} · seed ${data.seed} · ${at(data.end_ms)} simulated · ${data.events.length} events · trace hash ${data.trace_hash}`));
  const verdict = el("div", { id: "verdict", class: data.undecided ? "undecided" : data.held ? "held" : "not-held" });
  data.verdict.forEach((line, i) => verdict.appendChild(el("div", { class: i === 0 ? "line" : "" }, line)));
  if (data.why) verdict.appendChild(el("div", { class: "why" }, data.why));
  main.appendChild(verdict);

  // --- Findings --------------------------------------------------------------------------
  section("Findings", "Each links to its moment in the timeline; following it shows its key across every process.");
  const findings = el("ul", { id: "findings" });
  if (data.findings.length === 0) findings.appendChild(el("li", { class: "none" }, "none: every invariant held"));
  data.findings.forEach((finding) => {
    const li = el("li");
    const a = el("a", { class: "finding", href: "#event-" + (finding.event ?? 0), "data-key": finding.key ?? "" },
      finding.text);
    a.addEventListener("click", () => { if (finding.key) follow(finding.key); pick(finding.event); });
    li.appendChild(a);
    findings.appendChild(li);
  });
  main.appendChild(findings);

  // --- Swimlanes -------------------------------------------------------------------------
  section("Swimlanes", "Every event of every process over simulated time: grey the routine deliveries (poll, append, " +
    "apply, acknowledge, commit), blue the others, red faults and failures, purple operator actions, orange the " +
    "findings and the followed key. Hover for the line, click to find it in the timeline.");
  const laneH = 26;
  const lanesTop = 12;
  const lanesH = lanesTop + laneH * data.processes.length;
  const lanes = svg("svg", { id: "swimlanes", class: "chart", width: W, height: lanesH + 24, viewBox: `0 0 ${W} ${lanesH + 24}` });
  timeAxis(lanes, lanesH, lanesH + 24);
  const tickByEvent = new Map();
  data.processes.forEach((process, i) => {
    const y = lanesTop + i * laneH;
    const g = svg("g", { class: "lane", "data-process": process }, lanes);
    svg("rect", { class: "lane-band" + (i % 2 ? " odd" : ""), x: LEFT, y: y, width: W - LEFT - RIGHT, height: laneH }, g);
    svg("text", { class: "lane-label", x: LEFT - 8, y: y + laneH / 2 + 4, "text-anchor": "end" }, g).textContent = process;
    // Routine ticks first, so that the others are drawn over them.
    const mine = data.events.map((e, index) => [e, index]).filter(([e]) => e.process === process);
    mine.sort((a, b) => (a[0].category === "routine" ? 0 : 1) - (b[0].category === "routine" ? 0 : 1));
    for (const [e, index] of mine) {
      const short = e.category === "routine";
      const tick = svg("line", {
        class: "tick " + e.category, x1: x(e.at_ms), x2: x(e.at_ms),
        y1: y + (short ? 9 : 4), y2: y + laneH - (short ? 9 : 4), "data-event": index,
      }, g);
      title(tick, at(e.at_ms) + "  " + process + "  " + e.text);
      tick.addEventListener("click", () => pick(index));
      tickByEvent.set(index, tick);
    }
  });
  marks(lanes, lanesTop, laneH * data.processes.length);
  main.appendChild(lanes);

  // --- Positions on one LSN axis ---------------------------------------------------------
  section("Positions on one LSN axis", "Each server's WAL insert pointer (pg_current_wal_lsn()), each slot's " +
    "restart_lsn and confirmed_flush_lsn (pg_replication_slots), each connector's stored offset (its lsn in the " +
    "offsets topic), and, as the newest source LSN below them, Kafka's end offsets and last stable offsets of the " +
    "change topics, the sink consumer's positions (what it applied) and its group's committed positions (its checkpoint). A gap in a line is NULL (an invalidated slot's restart_lsn) " +
    "or a server that is down.");
  const series = new Map();
  function point(name, t, v) {
    if (!series.has(name)) series.set(name, []);
    series.get(name).push([t, v]);
  }
  for (const s of data.positions) {
    for (const server of s.servers) {
      point("wal-insert:" + server.server, s.at_ms, server.up ? server.wal_insert_lsn : null);
      for (const slot of server.slots) {
        point(`restart-lsn:${server.server}:${slot.slot_name}`, s.at_ms, server.up ? slot.restart_lsn : null);
        point(`confirmed-flush:${server.server}:${slot.slot_name}`, s.at_ms, server.up ? slot.confirmed_flush_lsn : null);
      }
    }
    for (const c of s.connectors) point("stored-offset:" + c.name, s.at_ms, c.stored_lsn);
    point("kafka-end", s.at_ms, s.kafka.end_lsn);
    point("kafka-stable", s.at_ms, s.kafka.stable_lsn);
    point("sink-applied", s.at_ms, s.sink_applied_lsn);
    point("sink-checkpoint", s.at_ms, s.sink_checkpoint_lsn);
  }
  // A series absent from the first samples (a slot created later) starts as NULL: pad by time.
  const values = [];
  for (const pts of series.values()) for (const [, v] of pts) if (v !== null && v > 0) values.push(v);
  const lo = values.length ? Math.min(...values) : 0, hi = values.length ? Math.max(...values) : 1;
  const span = Math.max(hi - lo, 1);
  const chartH = 300, top = 10;
  const y = (v) => top + chartH - chartH * (v - lo) / span;
  const lsnChart = svg("svg", { id: "lsn-axis", class: "chart", width: W, height: chartH + 40, viewBox: `0 0 ${W} ${chartH + 40}` });
  timeAxis(lsnChart, top + chartH, chartH + 40);
  const yAxis = svg("g", { class: "axis" }, lsnChart);
  for (let i = 0; i <= 5; i++) {
    const v = lo + span * i / 5;
    svg("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }, yAxis);
    svg("text", { x: LEFT - 6, y: y(v) + 4, "text-anchor": "end" }, yAxis).textContent = lsn(Math.round(v));
  }
  const legend = el("div", { class: "legend" });
  const dashes = { "restart-lsn": "6 3", "confirmed-flush": "", "wal-insert": "", "stored-offset": "2 2", "kafka-end": "", "kafka-stable": "8 3 2 3", "sink-applied": "1 2", "sink-checkpoint": "" };
  let colour = 0;
  for (const [name, pts] of series) {
    if (!pts.some(([, v]) => v !== null && v > 0)) {
      // Never set in this run (a connector that never flushed an offset): said, not drawn.
      legend.appendChild(el("span", { class: "never", "data-series": name }, name + ": never set"));
      continue;
    }
    const stroke = PALETTE[colour++ % PALETTE.length];
    let d = "", open = false, last = null;
    for (const [t, v] of pts) {
      if (v === null || v === 0) { open = false; last = null; continue; }
      d += open ? `H${x(t)}V${y(v)}` : `M${x(t)},${y(v)}`;
      open = true; last = v;
    }
    const kind = name.split(":")[0];
    const path = svg("path", { class: "series", "data-series": name, d: d, stroke: stroke, "stroke-dasharray": dashes[kind] || "" }, lsnChart);
    title(path, name + " (last " + lsn(last) + ")");
    legendItem(legend, name, stroke);
  }
  marks(lsnChart, top, chartH);
  main.appendChild(lsnChart);
  main.appendChild(legend);

  // --- Retained WAL against the cap ------------------------------------------------------
  section("Each slot's retained WAL", "pg_current_wal_lsn() − restart_lsn for every slot, against " +
    "max_slot_wal_keep_size (the dashed red line, when set); the band under a slot's line is its wal_status: " +
    "green reserved, yellow extended, orange unreserved, red lost (invalidated, restart_lsn NULL).");
  const slots = new Map();
  let cap = null;
  for (const s of data.positions) {
    for (const server of s.servers) {
      if (server.max_slot_wal_keep_size_bytes !== null) cap = Math.max(cap ?? 0, server.max_slot_wal_keep_size_bytes);
      for (const slot of server.slots) {
        const name = server.server + ":" + slot.slot_name;
        if (!slots.has(name)) slots.set(name, []);
        slots.get(name).push([s.at_ms, slot.retained_bytes, slot.wal_status]);
      }
    }
  }
  // The statuses the samples saw (before the invalidation points below are added).
  const statuses = new Set([...slots.values()].flatMap((pts) => pts.map((p) => p[2])));
  // What an invalidated slot held when the checkpoint invalidated it: the WAL insert pointer of
  // the first sample after that moment (a sample at the same millisecond may precede it), less
  // the restart_lsn the observation reports.
  const invalidated = [];
  for (const inv of data.invalidations) {
    const name = inv.server + ":" + inv.slot_name;
    const after = data.positions.find((s) => s.at_ms > inv.at_ms);
    const server = after && after.servers.find((sv) => sv.server === inv.server);
    if (!server || !slots.has(name)) continue;
    const held = Math.max(server.wal_insert_lsn - inv.restart_lsn, 0);
    const pts = slots.get(name);
    const at_index = pts.findIndex((p) => p[0] >= inv.at_ms);
    pts.splice(at_index < 0 ? pts.length : at_index, 0, [inv.at_ms, held, "unreserved"]);
    invalidated.push([name, inv, held]);
  }
  const retainedMax = Math.max(1, cap ?? 0, ...[...slots.values()].flatMap((pts) => pts.map((p) => p[1])));
  const rH = 150, rTop = 10, bandH = 12;
  const bandsH = bandH * slots.size;
  const retained = svg("svg", { id: "retained-wal", class: "chart", width: W, height: rTop + rH + bandsH + 40, viewBox: `0 0 ${W} ${rTop + rH + bandsH + 40}` });
  const ry = (b) => rTop + rH - rH * b / (retainedMax * 1.1);
  timeAxis(retained, rTop + rH + bandsH + 6, rH + 40);
  const rAxis = svg("g", { class: "axis" }, retained);
  for (let i = 0; i <= 4; i++) {
    const b = retainedMax * 1.1 * i / 4;
    svg("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: ry(b), y2: ry(b) }, rAxis);
    svg("text", { x: LEFT - 6, y: ry(b) + 4, "text-anchor": "end" }, rAxis).textContent = bytes(Math.round(b));
  }
  if (cap !== null) {
    const capLine = svg("line", { class: "cap", x1: LEFT, x2: W - RIGHT, y1: ry(cap), y2: ry(cap) }, retained);
    title(capLine, "max_slot_wal_keep_size = " + bytes(cap));
    svg("text", { class: "lane-label", x: W - RIGHT - 4, y: ry(cap) - 4, "text-anchor": "end" }, retained).textContent =
      "max_slot_wal_keep_size " + bytes(cap);
  }
  let slotIndex = 0;
  for (const [name, pts] of slots) {
    const stroke = PALETTE[slotIndex % PALETTE.length];
    let d = "";
    pts.forEach(([t, b], i) => { d += i === 0 ? `M${x(t)},${ry(b)}` : `H${x(t)}V${ry(b)}`; });
    title(svg("path", { class: "series", "data-series": "retained:" + name, d: d, stroke: stroke }, retained), name);
    // The wal_status band.
    const by = rTop + rH + slotIndex * bandH;
    svg("text", { class: "lane-label", x: LEFT - 6, y: by + 10, "text-anchor": "end" }, retained).textContent = name;
    for (let i = 0; i < pts.length; i++) {
      const [t, b, status] = pts[i];
      const next = i + 1 < pts.length ? pts[i + 1][0] : end;
      const band = svg("rect", { class: "status-band " + status, x: x(t), y: by + 1, width: Math.max(x(next) - x(t), 0) + 0.6, height: bandH - 2 }, retained);
      title(band, `${name} at ${at(t)}: wal_status ${status}, ${bytes(b)} retained`);
    }
    slotIndex++;
  }
  for (const [name, inv, held] of invalidated) {
    const g = svg("g", { class: "invalidation-marker", "data-event": inv.event }, retained);
    title(svg("circle", { cx: x(inv.at_ms), cy: ry(held), r: 5, fill: "#d0021b" }, g),
      `${name} invalidated at ${at(inv.at_ms)}: it held about ${bytes(held)} (restart_lsn ${lsn(inv.restart_lsn)}; ` +
      `the checkpoint keeps WAL from ${lsn(inv.oldest_kept_lsn)})`);
    svg("text", { class: "lane-label", x: x(inv.at_ms) + 8, y: ry(held) + 4 }, g).textContent =
      `${name} lost: held ${bytes(held)}`;
    g.addEventListener("click", () => pick(inv.event));
  }
  marks(retained, rTop, rH);
  main.appendChild(retained);
  main.appendChild(el("p", { class: "hint" }, slots.size === 0 ? "No slot existed during the run." :
    "wal_status seen: " + [...statuses].join(", ") + (cap === null ? "; max_slot_wal_keep_size = -1 (no cap)" : "")));

  // --- Health signals --------------------------------------------------------------------
  section("Health signals", "What a dashboard shows of each connector (game-day drill 7), on a logarithmic scale: " +
    "MilliSecondsBehindSource (the streaming metric: the last event's lag, set when an event comes; it does not grow " +
    "while nothing arrives), MilliSecondsSinceLastEvent (what grows when nothing arrives), the heartbeat topic's " +
    "age; a gap is -1 (unknown: no event since the task started, or no task). Under them, the states the REST API's " +
    "/connectors/NAME/status gives: the connector's and its task's (green RUNNING, red FAILED, grey STOPPED or no " +
    "task, yellow UNASSIGNED; faded where its worker is down and does not answer).");
  const connectorNames = data.positions.length ? data.positions[0].connectors.map((c) => c.name) : [];
  const hTop = 10, hH = 200;
  const rowsH = 20 * 2 * connectorNames.length;
  const health = svg("svg", { id: "health", class: "chart", width: W, height: hTop + hH + rowsH + 40, viewBox: `0 0 ${W} ${hTop + hH + rowsH + 40}` });
  // Milliseconds on a log scale, 1 ms to the largest value.
  const healthLines = new Map();
  function healthPoint(name, t, v) {
    if (!healthLines.has(name)) healthLines.set(name, []);
    healthLines.get(name).push([t, v]);
  }
  data.positions.forEach((s, i) => {
    const next = i + 1 < data.positions.length ? data.positions[i + 1].at_ms : end;
    for (const c of s.connectors) {
      // Between two samples the times since grow with the clock; the lag stays.
      healthPoint("milliseconds-behind-source:" + c.name, s.at_ms, [c.lag_ms, c.lag_ms]);
      healthPoint("milliseconds-since-last-event:" + c.name, s.at_ms,
        c.last_event_ms === null ? [null, null] : [s.at_ms - c.last_event_ms, next - c.last_event_ms]);
      healthPoint("heartbeat-age:" + c.name, s.at_ms,
        c.last_heartbeat_ms === null ? [null, null] : [s.at_ms - c.last_heartbeat_ms, next - c.last_heartbeat_ms]);
    }
  });
  let maxMs = 10;
  for (const pts of healthLines.values()) for (const [, [a, b]] of pts) maxMs = Math.max(maxMs, a ?? 0, b ?? 0);
  const logMax = Math.log10(maxMs + 1);
  const hy = (ms) => hTop + hH - hH * Math.log10(Math.max(ms, 0) + 1) / logMax;
  const hAxis = svg("g", { class: "axis" }, health);
  for (const [ms, label] of [[0, "0"], [10, "10 ms"], [100, "100 ms"], [1000, "1 s"], [10000, "10 s"], [100000, "100 s"], [1000000, "1000 s"], [10000000, "10000 s"]]) {
    if (ms > maxMs * 1.01) break;
    svg("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: hy(ms), y2: hy(ms) }, hAxis);
    svg("text", { x: LEFT - 6, y: hy(ms) + 4, "text-anchor": "end" }, hAxis).textContent = label;
  }
  timeAxis(health, hTop + hH + rowsH + 6, hH + 40);
  const healthLegend = el("div", { class: "legend" });
  let healthColour = 0;
  for (const [name, pts] of healthLines) {
    const stroke = PALETTE[healthColour++ % PALETTE.length];
    let d = "";
    pts.forEach(([t, [a, b]], i) => {
      const next = i + 1 < pts.length ? pts[i + 1][0] : end;
      if (a === null) return;
      d += `M${x(t)},${hy(a)}L${x(next)},${hy(b)}`;
    });
    const known = pts.some(([, [a]]) => a !== null);
    if (!known) {
      const never = name.startsWith("heartbeat-age:") ? ": no heartbeat record" : ": -1 throughout";
      healthLegend.appendChild(el("span", { class: "never", "data-series": name }, name + never));
      continue;
    }
    title(svg("path", { class: "series", "data-series": name, d: d, stroke: stroke }, health), name);
    legendItem(healthLegend, name, stroke);
  }
  connectorNames.forEach((name, ci) => {
    ["connector_state", "task_state"].forEach((field, fi) => {
      const yy = hTop + hH + 4 + (ci * 2 + fi) * 20;
      const label = connectorNames.length === 1 ? (fi === 0 ? "connector" : "task") : name + (fi === 0 ? "" : " task");
      svg("text", { class: "lane-label", x: LEFT - 6, y: yy + 13, "text-anchor": "end" }, health).textContent = label;
      data.positions.forEach((s, i) => {
        const next = i + 1 < data.positions.length ? data.positions[i + 1].at_ms : end;
        const c = s.connectors[ci];
        const state = c ? (c[field] ?? "STOPPED") : "UNASSIGNED";
        const shown = c && !c.reachable ? "no answer (worker down)" : state;
        title(svg("rect", {
          class: "state-band " + state + (c && !c.reachable ? " unreachable" : ""), "data-state": field,
          x: x(s.at_ms), y: yy, width: Math.max(x(next) - x(s.at_ms), 0) + 0.6, height: 16,
        }, health), `${label} ${c && c[field] === null ? "no task (STOPPED)" : shown} from ${at(s.at_ms)}`);
      });
    });
  });
  marks(health, hTop, hH);
  main.appendChild(health);
  main.appendChild(healthLegend);

  // --- One key followed ------------------------------------------------------------------
  section("One key followed", "The commits that change the key, the snapshot reads and chunks that read it, its " +
    "records in Kafka, the sink's applies of it (orange on the swimlanes). Choose a key, or open the page with " +
    "#key=42 (or #key=public.orders:(5,2)).");
  const follower = el("div", { id: "follow" });
  follower.appendChild(el("label", { for: "follow-key" }, "key"));
  const select = el("select", { id: "follow-key" });
  for (const key of data.keys) select.appendChild(el("option", { value: key.id }, `${key.label} (${key.events.length} events)`));
  follower.appendChild(select);
  main.appendChild(follower);
  const keyEvents = el("ol", { id: "key-events" });
  main.appendChild(keyEvents);
  function follow(id) {
    const wanted = String(id).replace(/\s+/g, "");
    const key = data.keys.find((k) => k.id === wanted) || data.keys.find((k) => k.id.endsWith(":" + wanted));
    for (const tick of document.querySelectorAll(".tick.followed")) tick.classList.remove("followed");
    keyEvents.textContent = "";
    if (!key) {
      keyEvents.setAttribute("data-key", wanted);
      keyEvents.appendChild(el("li", {}, `no key ${wanted} among the keys this page offers`));
      return;
    }
    select.value = key.id;
    keyEvents.setAttribute("data-key", key.id);
    for (const index of key.events) {
      const e = data.events[index];
      const li = el("li");
      const a = el("a", { href: "#event-" + index }, at(e.at_ms));
      a.addEventListener("click", () => pick(index));
      li.appendChild(a);
      li.appendChild(document.createTextNode(`  ${e.process}  ${e.text}`));
      keyEvents.appendChild(li);
      const tick = tickByEvent.get(index);
      if (tick) tick.classList.add("followed");
    }
    if (key.events.length === 0) keyEvents.appendChild(el("li", {}, "no event names this key"));
  }
  select.addEventListener("change", () => follow(select.value));

  // --- The timeline ----------------------------------------------------------------------
  section("Timeline", "Every line of the run, in time order, as `handoff run --verbose` prints it.");
  const foldLabel = el("label");
  const fold = el("input", { type: "checkbox", id: "fold-routine" });
  fold.checked = true;
  foldLabel.appendChild(fold);
  foldLabel.appendChild(document.createTextNode(" hide routine deliveries"));
  main.appendChild(foldLabel);
  const table = el("table", { id: "timeline", class: "fold" });
  const body = el("tbody");
  data.events.forEach((e, index) => {
    const tr = el("tr", { id: "event-" + index, class: e.category });
    tr.appendChild(el("td", { class: "at mono" }, at(e.at_ms)));
    tr.appendChild(el("td", { class: "process mono" }, e.process));
    tr.appendChild(el("td", { class: "mono" }, e.text));
    body.appendChild(tr);
  });
  table.appendChild(body);
  main.appendChild(table);
  fold.addEventListener("change", () => table.classList.toggle("fold", fold.checked));
  function pick(index) {
    if (index === null || index === undefined) return;
    for (const row of document.querySelectorAll("#timeline tr.picked")) row.classList.remove("picked");
    const row = document.getElementById("event-" + index);
    if (!row) return;
    if (row.classList.contains("routine")) { fold.checked = false; table.classList.remove("fold"); }
    row.classList.add("picked");
    row.scrollIntoView({ block: "center" });
  }

  const details = el("details");
  details.appendChild(el("summary", {}, "The text report (handoff run)"));
  details.appendChild(el("pre", {}, data.text_report));
  main.appendChild(details);

  // The key to follow: #key=… in the address, else the run's choice.
  const fragment = decodeURIComponent(location.hash.replace(/^#/, ""));
  const asked = fragment.startsWith("key=") ? fragment.slice(4) : null;
  if (asked !== null) follow(asked); else if (data.followed !== null) follow(data.followed);
  if (fragment.startsWith("event-")) pick(Number(fragment.slice(6)));
  document.body.setAttribute("data-rendered", "ok");
})();
