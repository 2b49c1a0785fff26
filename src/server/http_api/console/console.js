// runnel's web console: pages drawn from the broker's JSON API.
//
// Every piece of broker data (topic names, record keys, values, headers, client ids)
// is hostile input. It only ever enters the page as text: `el` builds elements and
// adds strings as text nodes; nothing here assigns HTML.
"use strict";

const main = () => document.getElementById("main");

// el("td", {class: "num"}, "text", otherNode, ...): an element with attributes and
// children; strings and numbers become text nodes, null and undefined are skipped.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function table(id, headers, rows) {
  const head = el("tr", {}, headers.map((h) => (h instanceof Node ? h : el("th", {}, h))));
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, rows));
}

const num = (v) => el("td", { class: "num" }, v === null || v === undefined ? el("span", { class: "null" }, "–") : String(v));
const nullText = (v) => (v === null || v === undefined ? el("span", { class: "null" }, "null") : v);
const badge = (text, cls) => el("span", { class: "badge " + (cls || "") }, text);
const link = (href, text) => el("a", { href }, text);

function bytesText(n) {
  if (n === null || n === undefined) return null;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return (i === 0 ? String(v) : v.toFixed(1)) + " " + units[i];
}

function timeText(ms) {
  if (typeof ms !== "number" || ms < 0) return String(ms);
  const d = new Date(ms);
  return isNaN(d.getTime()) ? String(ms) : d.toISOString();
}

// The JSON of `path`, or an Error whose message is the API's (with the field at fault).
async function api(path, options) {
  const resp = await fetch(path, options);
  let body = null;
  try {
    body = await resp.json();
  } catch (_) {
    body = null;
  }
  if (!resp.ok) {
    const what = body && body.message ? body.message : resp.statusText;
    const field = body && body.field ? " (" + body.field + ")" : "";
    const code = body && body.error ? body.error + ": " : "";
    throw new Error("HTTP " + resp.status + " " + code + what + field);
  }
  return body;
}

const postJson = (path, value) =>
  api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(value) });

const message = (kind, text, id) => el("div", { class: "msg " + kind, id, role: kind === "error" ? "alert" : "status" }, text);

function show(...nodes) {
  main().replaceChildren(...nodes);
}

// "#records?topic=a&partition=0" → ["records", URLSearchParams]
function route() {
  const hash = location.hash.replace(/^#/, "");
  const q = hash.indexOf("?");
  const page = (q < 0 ? hash : hash.slice(0, q)) || "topics";
  return [page, new URLSearchParams(q < 0 ? "" : hash.slice(q + 1))];
}

function hashFor(page, params) {
  const q = new URLSearchParams(params).toString();
  return "#" + page + (q ? "?" + q : "");
}

// ---- Topics -------------------------------------------------------------------------

// A watermark cell of a partition another broker leads says where to look.
function elsewhere(cell, p) {
  if (p.latest === null) cell.title = "led by broker " + p.leader + ": its console shows the watermarks";
  return cell;
}

// Internal topics (__consumer_offsets' 50 partitions) last, their partitions folded
// unless the page is #topics?internal=1.
async function topicsPage(params) {
  const { topics } = await api("/topics");
  const showInternal = params.get("internal") === "1";
  topics.sort((a, b) => (a.internal === b.internal ? (a.name < b.name ? -1 : 1) : a.internal ? 1 : -1));
  const rows = [];
  for (const t of topics) {
    const total = t.partitions.reduce((s, p) => s + (p.size_bytes || 0), 0);
    const folded = t.internal && !showInternal;
    rows.push(
      el(
        "tr",
        { class: "topic-row", "data-topic": t.name },
        el("td", { colspan: 8 }, t.name, t.internal ? badge("internal") : null, " ",
          el("span", { class: "muted" }, t.partitions.length + " partition(s), " + bytesText(total)),
          t.internal ? [" ", link(showInternal ? "#topics" : "#topics?internal=1", folded ? "show partitions" : "hide partitions")] : null),
      ),
    );
    if (folded) continue;
    for (const p of t.partitions) {
      rows.push(
        el(
          "tr",
          { "data-topic": t.name, "data-partition": p.partition },
          el("td", {}, link(hashFor("records", { topic: t.name, partition: p.partition }), t.name + "-" + p.partition)),
          num(p.leader),
          el("td", {}, p.replicas.join(", ")),
          el("td", {}, p.isr.join(", ")),
          elsewhere(num(p.earliest), p),
          elsewhere(num(p.latest), p),
          elsewhere(num(p.latest !== null && p.earliest !== null ? p.latest - p.earliest : null), p),
          el("td", { class: "num", title: p.size_bytes === null ? "no replica on this broker" : p.size_bytes + " bytes" },
            p.size_bytes === null ? el("span", { class: "null" }, "–") : bytesText(p.size_bytes)),
        ),
      );
    }
  }
  const headers = ["Partition", "Leader", "Replicas", "ISR", "Earliest", "Latest (HW)", "Records", "Size"].map((h, i) =>
    el("th", { class: i === 1 || i >= 4 ? "num" : null }, h),
  );
  show(
    el("h1", {}, "Topics"),
    el("p", { class: "muted" }, "Watermarks are shown for partitions this broker leads; sizes for replicas it holds."),
    topics.length ? table("topics-table", headers, rows) : el("p", {}, "No topics yet."),
  );
}

// ---- Records ------------------------------------------------------------------------

// A record's bytes field as a cell: text, or base64 marked as such, or null.
function bytesCell(v, base64, cls) {
  return el("td", { class: "bytes " + cls }, nullText(v), v !== null && base64 ? badge("base64", "b64") : null);
}

function headersCell(headers, base64) {
  if (!headers || headers.length === 0) return el("td", { class: "bytes headers" }, el("span", { class: "muted" }, "–"));
  return el(
    "td",
    { class: "bytes headers" },
    headers.map((h, i) => [i ? el("br") : null, h.key, ": ", nullText(h.value), h.value !== null && base64 ? badge("base64", "b64") : null]),
  );
}

async function recordsPage(params) {
  const { topics } = await api("/topics");
  const topic = params.get("topic") || (topics.find((t) => !t.internal) || topics[0] || { name: "" }).name;
  const form = el(
    "form",
    { id: "records-form", class: "inline" },
    el("label", {}, "Topic", el("select", { name: "topic", id: "records-topic" },
      topics.map((t) => el("option", { value: t.name, selected: t.name === topic }, t.name)))),
    el("label", {}, "Partition", el("input", { name: "partition", id: "records-partition", type: "number", min: 0, value: params.get("partition") || "0" })),
    el("label", {}, "From", el("select", { name: "mode", id: "records-mode" },
      el("option", { value: "offset", selected: !params.has("timestamp") }, "offset"),
      el("option", { value: "timestamp", selected: params.has("timestamp") }, "timestamp"))),
    el("label", {}, "Offset or timestamp (ms or ISO date)",
      el("input", { name: "from", id: "records-from", value: params.get("offset") || params.get("timestamp") || "", placeholder: "earliest" })),
    el("label", {}, "Limit", el("input", { name: "limit", id: "records-limit", type: "number", min: 1, max: 500, value: params.get("limit") || "50" })),
    el("button", { type: "submit", id: "records-go" }, "Show"),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const p = { topic: f.get("topic"), partition: f.get("partition"), limit: f.get("limit") };
    const from = String(f.get("from")).trim();
    if (from !== "") {
      if (f.get("mode") === "timestamp") {
        p.timestamp = /^\d+$/.test(from) ? from : String(Date.parse(from));
      } else {
        p.offset = from;
      }
    }
    location.hash = hashFor("records", p);
  });
  const out = el("div", { id: "records-out" });
  show(el("h1", {}, "Records"), form, out);
  if (!topic) {
    out.append(el("p", {}, "No topics yet."));
    return;
  }
  const q = new URLSearchParams();
  for (const k of ["offset", "timestamp", "limit"]) if (params.get(k)) q.set(k, params.get(k));
  const partition = params.get("partition") || "0";
  let page;
  try {
    page = await api("/topics/" + encodeURIComponent(topic) + "/partitions/" + encodeURIComponent(partition) + "/records?" + q);
  } catch (e) {
    out.append(message("error", e.message, "records-error"));
    return;
  }
  out.append(
    el("p", { class: "summary", id: "records-summary" },
      topic + "-" + page.partition + ": offsets " + page.earliest + " to " + page.latest + " (high watermark); showing " +
        page.records.length + " record(s) from offset " + page.start_offset),
  );
  const rows = page.records.map((r) => {
    const b64 = r.encoding === "base64";
    return el(
      "tr",
      { "data-offset": r.offset },
      num(r.offset),
      el("td", { title: String(r.timestamp) }, timeText(r.timestamp)),
      bytesCell(r.key, b64, "key"),
      bytesCell(r.value, b64, "value"),
      headersCell(r.headers, b64),
    );
  });
  out.append(table("records-table", [el("th", { class: "num" }, "Offset"), "Timestamp", "Key", "Value", "Headers"], rows));
  if (page.next_offset < page.latest) {
    const next = { topic, partition, offset: page.next_offset, limit: params.get("limit") || "50" };
    out.append(el("a", { href: hashFor("records", next), id: "records-next" }, "Next page →"));
  }
}

// ---- Groups -------------------------------------------------------------------------

async function groupsPage() {
  const { groups } = await api("/consumer-groups");
  const rows = groups.map((g) =>
    el("tr", { "data-group": g.group_id },
      el("td", {}, link(hashFor("group", { id: g.group_id }), g.group_id)),
      el("td", {}, g.state),
      el("td", {}, g.protocol_type || "–")),
  );
  show(
    el("h1", {}, "Consumer groups"),
    el("p", { class: "muted" }, "Groups coordinated by this broker."),
    groups.length ? table("groups-table", ["Group", "State", "Protocol type"], rows) : el("p", {}, "No groups yet."),
  );
}

async function groupPage(params) {
  const id = params.get("id") || "";
  const g = await api("/consumer-groups/" + encodeURIComponent(id));
  const members = g.members.map((m) =>
    el("tr", { "data-member": m.member_id },
      el("td", {}, m.member_id, m.group_instance_id ? badge("static: " + m.group_instance_id) : null),
      el("td", {}, m.client_id),
      el("td", {}, m.client_host),
      el("td", {}, m.assignment.length ? m.assignment.map((a, i) => [i ? el("br") : null, a.topic + ": " + a.partitions.join(", ")]) : "–")),
  );
  const totalLag = g.offsets.reduce((s, o) => s + (o.lag || 0), 0);
  const offsets = g.offsets.map((o) =>
    el("tr", { "data-topic": o.topic, "data-partition": o.partition },
      el("td", {}, o.topic),
      num(o.partition),
      el("td", {}, o.member_id || "–"),
      num(o.committed),
      num(o.latest),
      el("td", { class: "num lag" }, o.lag === null ? el("span", { class: "null" }, "–") : String(o.lag))),
  );
  show(
    el("h1", {}, "Group ", g.group_id),
    el("p", { class: "summary", id: "group-summary" }, "State " + g.state + (g.protocol ? ", assignor " + g.protocol : "") +
      ", " + g.members.length + " member(s), total lag " + totalLag),
    el("h2", {}, "Members"),
    g.members.length ? table("members-table", ["Member", "Client id", "Host", "Assignment"], members) : el("p", {}, "No members."),
    el("h2", {}, "Offsets and lag"),
    table("lag-table", ["Topic", el("th", { class: "num" }, "Partition"), "Member", el("th", { class: "num" }, "Committed"),
      el("th", { class: "num" }, "Latest (HW)"), el("th", { class: "num" }, "Lag")], offsets),
  );
}

// ---- Brokers ------------------------------------------------------------------------

async function brokersPage() {
  const c = await api("/cluster");
  const rows = c.brokers.map((b) =>
    el("tr", { "data-node": b.node_id },
      num(b.node_id),
      el("td", {}, b.host + ":" + b.port),
      el("td", {}, b.rack === null ? el("span", { class: "null" }, "–") : b.rack),
      el("td", {}, b.controller ? badge("controller", "ctl") : null, b.fenced ? badge("fenced", "bad") : null,
        b.this_broker ? badge("this broker") : null)),
  );
  show(
    el("h1", {}, "Brokers"),
    el("p", { class: "summary" }, "Cluster " + c.cluster_id + "; active controller " + (c.controller_id === null ? "unknown" : c.controller_id)),
    table("brokers-table", [el("th", { class: "num" }, "Node"), "Host:port", "Rack", "Role"], rows),
  );
}

// ---- Create a topic, produce a record -----------------------------------------------

// "a=1\nb=2" → {a: "1", b: "2"}; a line without "=" is an error naming it.
function keyValues(text, what) {
  const out = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter((l) => l)) {
    const i = line.indexOf("=");
    if (i <= 0) throw new Error(what + ": \"" + line + "\" is not name=value");
    out[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  return out;
}

function formRow(label, input) {
  return [el("label", { for: input.id }, label), input];
}

function createTopicPage() {
  const result = el("div", { id: "create-result" });
  const form = el(
    "form",
    { id: "create-topic-form" },
    formRow("Name", el("input", { id: "create-name", name: "name", required: true, maxlength: 249 })),
    formRow("Partitions", el("input", { id: "create-partitions", name: "partitions", type: "number", min: 1, placeholder: "broker default" })),
    formRow("Replication factor", el("input", { id: "create-rf", name: "replication_factor", type: "number", min: 1, placeholder: "broker default" })),
    formRow("Configs (name=value per line)", el("textarea", { id: "create-configs", name: "configs", placeholder: "retention.ms=86400000" })),
    el("span"),
    el("div", {}, el("button", { type: "submit", id: "create-submit" }, "Create topic")),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    result.replaceChildren();
    try {
      const body = { name: f.get("name") };
      if (f.get("partitions")) body.partitions = Number(f.get("partitions"));
      if (f.get("replication_factor")) body.replication_factor = Number(f.get("replication_factor"));
      const configs = keyValues(String(f.get("configs")), "configs");
      if (Object.keys(configs).length) body.configs = configs;
      const t = await postJson("/topics", body);
      result.append(message("ok", "Created topic " + t.name + " with " + t.partitions + " partition(s), replication factor " +
        t.replication_factor + " (id " + t.topic_id + ")", "create-ok"));
    } catch (e) {
      result.append(message("error", e.message, "create-error"));
    }
  });
  show(el("h1", {}, "Create a topic"), form, result);
}

async function producePage(params) {
  const { topics } = await api("/topics");
  const result = el("div", { id: "produce-result" });
  const topic = params.get("topic") || "";
  const form = el(
    "form",
    { id: "produce-form" },
    formRow("Topic", el("select", { id: "produce-topic", name: "topic" },
      topics.filter((t) => !t.internal).map((t) => el("option", { value: t.name, selected: t.name === topic }, t.name)))),
    formRow("Partition", el("input", { id: "produce-partition", name: "partition", type: "number", min: 0, placeholder: "by key, or spread" })),
    formRow("Key", el("input", { id: "produce-key", name: "key", placeholder: "none" })),
    formRow("Value", el("textarea", { id: "produce-value", name: "value" })),
    formRow("Headers (name=value per line)", el("textarea", { id: "produce-headers", name: "headers" })),
    el("span"),
    el("div", {}, el("button", { type: "submit", id: "produce-submit" }, "Produce")),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    result.replaceChildren();
    try {
      const rec = { value: String(f.get("value")) };
      if (f.get("key")) rec.key = String(f.get("key"));
      if (f.get("partition") !== "") rec.partition = Number(f.get("partition"));
      const headers = keyValues(String(f.get("headers")), "headers");
      if (Object.keys(headers).length) rec.headers = headers;
      const t = String(f.get("topic"));
      const r = await postJson("/topics/" + encodeURIComponent(t) + "/messages?acks=all", rec);
      result.append(
        message("ok", "Produced to " + t + "-" + r.partition + " at offset " + r.offset, "produce-ok"),
        link(hashFor("records", { topic: t, partition: r.partition, offset: r.offset }), "Show it"),
      );
    } catch (e) {
      result.append(message("error", e.message, "produce-error"));
    }
  });
  show(el("h1", {}, "Produce a test record"), topics.length ? form : el("p", {}, "Create a topic first."), result);
}

// ---- Navigation ---------------------------------------------------------------------

const pages = {
  topics: topicsPage,
  records: recordsPage,
  groups: groupsPage,
  group: groupPage,
  brokers: brokersPage,
  "create-topic": createTopicPage,
  produce: producePage,
};

// When a page is drawn, `main` says which: data-page and data-loaded (the hash drawn).
async function render() {
  const hash = location.hash;
  const [page, params] = route();
  main().removeAttribute("data-loaded");
  for (const a of document.querySelectorAll("nav a")) {
    const active = a.dataset.page === page || (page === "group" && a.dataset.page === "groups");
    a.classList.toggle("active", active);
  }
  const draw = pages[page] || topicsPage;
  try {
    await draw(params);
  } catch (e) {
    show(message("error", e.message, "page-error"));
  }
  main().setAttribute("data-page", page);
  main().setAttribute("data-loaded", hash);
}

async function clusterLine() {
  try {
    const c = await api("/cluster");
    document.getElementById("cluster-line").textContent =
      "cluster " + c.cluster_id + " · broker " + c.node_id + " · " + c.brokers.length + " broker(s)";
  } catch (_) {
    // The pages say what failed.
  }
}

window.addEventListener("hashchange", render);
document.addEventListener("DOMContentLoaded", () => {
  clusterLine();
  render();
});
