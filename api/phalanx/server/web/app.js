// Phalanx web page: the job list, and for one job its world-size/epoch timeline, throughput and
// loss, failures, checkpoints and events. Everything comes from the REST API (/api/v1) with the
// caller's bearer token, so Kubernetes RBAC decides what the page shows. Plain browser
// JavaScript and vendored uPlot: nothing to build.
"use strict";

const POLL_MS = 3000;
const TOKEN_KEY = "phalanx-token";
const CHART_HEIGHT = 220;
const COLORS = { worldSize: "#2f6fde", nodes: "#7f8ea3", epoch: "#c0392b",
                 throughput: "#1e8e5a", loss: "#b7791f" };

const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  selected: null, // {namespace, name}
  charts: {}, // element id -> uPlot
  chartJob: null,
};

const $ = (selector) => document.querySelector(selector);

// --- REST ----------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
  }
}

async function api(path) {
  const headers = state.token ? { Authorization: `Bearer ${state.token}` } : {};
  const response = await fetch(`api/v1/${path}`, { headers });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch (_) { /* not JSON: keep the status text */ }
    throw new ApiError(response.status, detail);
  }
  return response.json();
}

const jobPath = ({ namespace, name }) =>
  `namespaces/${encodeURIComponent(namespace)}/jobs/${encodeURIComponent(name)}`;

// --- small DOM helpers ---------------------------------------------------------------------
function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "—" : String(text);
  if (className) td.className = className;
  return td;
}

function fillFacts(dl, facts) {
  dl.replaceChildren();
  for (const [term, value] of facts) {
    const dt = document.createElement("dt");
    const dd = document.createElement("dd");
    dt.textContent = term;
    dd.textContent = value === null || value === undefined ? "—" : String(value);
    dl.append(dt, dd);
  }
}

const percent = (x) => (x === null || x === undefined ? null : `${(100 * x).toFixed(1)} %`);
const when = (iso) => (iso ? new Date(iso).toLocaleString() : null);
// status.progress.eta: the time left and the clock time; null (shown "—") when not known.
function eta(iso) {
  if (!iso) return null;
  const left = Math.max(0, Math.round((new Date(iso) - Date.now()) / 1000));
  const [h, m, s] = [Math.floor(left / 3600), Math.floor((left % 3600) / 60), left % 60];
  const span = h ? `${h} h ${m} min` : m ? `${m} min ${s} s` : `${s} s`;
  return `in ${span} (${when(iso)})`;
}

function showError(error) {
  const p = $("#error");
  p.hidden = !error;
  if (!error) return;
  p.textContent = error.status === 401
    ? "401: this API needs a bearer token (kubectl create token <service-account>)."
    : String(error.message || error);
}

// --- job list ------------------------------------------------------------------------------
async function refreshList() {
  const namespace = $("#namespace").value.trim();
  const params = new URLSearchParams({ limit: "200" });
  if (namespace) params.set("namespace", namespace);
  if ($("#phase").value) params.set("phase", $("#phase").value);
  const page = await api(`jobs?${params}`);
  const body = $("#jobs tbody");
  body.replaceChildren();
  for (const job of page.items) {
    const row = body.insertRow();
    row.dataset.job = `${job.namespace}/${job.name}`;
    const sel = state.selected;
    if (sel && sel.namespace === job.namespace && sel.name === job.name) row.className = "selected";
    cell(row, job.namespace);
    cell(row, job.name);
    cell(row, job.phase, `phase phase-${job.phase}`);
    cell(row, job.nodes);
    cell(row, job.worldSize);
    cell(row, job.epoch);
    cell(row, job.step);
    cell(row, job.restarts);
    cell(row, percent(job.goodput));
    row.addEventListener("click", () => { location.hash = row.dataset.job; });
  }
  if (page.remaining > 0) {
    const row = body.insertRow();
    const td = cell(row, `${page.remaining} more: filter by namespace or phase`, "hint");
    td.colSpan = 9;
  }
}

// --- charts ----------------------------------------------------------------------------------
const stepped = () => uPlot.paths.stepped({ align: 1 });

function timelineOptions(width) {
  return {
    width, height: CHART_HEIGHT,
    scales: { x: { time: true }, size: { range: (u, lo, hi) => [0, Math.max(hi, 1) + 1] },
              epoch: { range: (u, lo, hi) => [0, Math.max(hi, 1) + 1] } },
    axes: [{}, { scale: "size", label: "ranks / nodes" },
           { scale: "epoch", side: 1, label: "epoch", grid: { show: false } }],
    series: [
      {},
      { label: "world size", scale: "size", stroke: COLORS.worldSize, width: 2, paths: stepped() },
      { label: "nodes", scale: "size", stroke: COLORS.nodes, dash: [6, 4], paths: stepped() },
      { label: "epoch", scale: "epoch", stroke: COLORS.epoch, paths: stepped() },
    ],
  };
}

function throughputOptions(width) {
  return {
    width, height: CHART_HEIGHT,
    scales: { x: { time: true }, rate: {}, loss: {} },
    axes: [{}, { scale: "rate", label: "samples/s" },
           { scale: "loss", side: 1, label: "loss", grid: { show: false } }],
    series: [
      {},
      { label: "samples/s", scale: "rate", stroke: COLORS.throughput, width: 2 },
      { label: "loss", scale: "loss", stroke: COLORS.loss },
    ],
  };
}

function seconds(iso) { return Date.parse(iso) / 1000; }

/** Timeline data; a running job's last state is carried to now, so the line reaches the present. */
function timelineData(points, phase) {
  const rows = points.map((p) => [seconds(p.time), p.worldSize, p.nodes, p.epoch]);
  if (rows.length && phase !== "Succeeded" && phase !== "Failed") {
    const last = rows[rows.length - 1];
    rows.push([Math.max(Date.now() / 1000, last[0]), last[1], last[2], last[3]]);
  }
  return [0, 1, 2, 3].map((i) => rows.map((r) => r[i]));
}

/** One row per new training step; a restart breaks the line (a null row) instead of drawing the
 * last step's numbers across the time the job did not train. */
function throughputData(points) {
  const rows = [];
  let last = null;
  for (const p of points) {
    if (p.step === null || p.step === undefined) continue;
    if (last && p.epoch === last.epoch && p.step === last.step) continue; // nothing new
    if (last && p.epoch !== last.epoch) rows.push([seconds(p.time) - 0.001, null, null]);
    rows.push([seconds(p.time), p.samplesPerSecond, p.loss]);
    last = p;
  }
  return [0, 1, 2].map((i) => rows.map((r) => r[i]));
}

function drawChart(id, options, data) {
  const el = document.getElementById(id);
  const width = el.clientWidth;
  let chart = state.charts[id];
  if (chart && state.chartJob === jobKey(state.selected)) {
    chart.setData(data);
  } else {
    if (chart) chart.destroy();
    el.replaceChildren();
    chart = new uPlot(options(width), data, el);
    state.charts[id] = chart;
  }
  el.dataset.points = String(data[0].length);
  el.dataset.width = String(width);
}

function resizeCharts() {
  for (const [id, chart] of Object.entries(state.charts)) {
    const el = document.getElementById(id);
    if (!el.clientWidth) continue; // hidden
    chart.setSize({ width: el.clientWidth, height: CHART_HEIGHT });
    el.dataset.width = String(el.clientWidth);
  }
}

// --- one job ---------------------------------------------------------------------------------
const jobKey = (job) => (job ? `${job.namespace}/${job.name}` : null);

async function optional(path) {
  try { return await api(path); } catch (error) { return { error }; }
}

async function refreshJob() {
  const sel = state.selected;
  if (!sel) { $("#job").hidden = true; return; }
  const base = jobPath(sel);
  const [job, history, checkpoints, events] = await Promise.all([
    api(base), api(`${base}/history`), optional(`${base}/checkpoints`), optional(`${base}/events`),
  ]);
  if (jobKey(state.selected) !== jobKey(sel)) return; // another job was picked meanwhile
  const status = job.status || {};
  const progress = status.progress || {};
  $("#job").hidden = false;
  $("#job-title").textContent = `${job.namespace}/${job.name}`;
  $("#job-phase").textContent = status.phase || "";
  $("#job-phase").className = `phase phase-${status.phase}`;
  const restarts = status.restarts || {};
  // A program that reports no steps: say so, rather than a step, goodput or lost time it never had.
  const unreported = (status.conditions || []).some(
    (c) => c.type === "ProgressReported" && c.status === "False");
  const notReported = "not reported: the program reports no steps (see phalanx.progress)";
  fillFacts($("#job-facts"), [
    ["nodes", `${status.nodes ?? 0} (replicas ${job.spec.replicas.min}..${job.spec.replicas.max})`],
    ["world size", status.worldSize],
    ["hot spares", `${status.spares ?? 0} ready (spec.spares ${job.spec.spares ?? 0})`],
    ["epoch", status.epoch],
    ["step", unreported ? notReported
      : progress.totalSteps ? `${progress.step} / ${progress.totalSteps}` : progress.step],
    ["ETA", unreported ? notReported : status.phase === "Running" ? eta(progress.eta) : null],
    ["restarts", `${restarts.total ?? 0} (application ${restarts.application ?? 0}, ` +
                 `infrastructure ${restarts.infrastructure ?? 0})`],
    ["goodput", unreported ? notReported : percent(status.goodput)],
    ["lost time", unreported || status.lostSeconds === undefined ? null
      : `${status.lostSeconds.toFixed(1)} s`],
    ["created", when(job.created)],
  ]);

  drawChart("timeline", timelineOptions, timelineData(history.points, status.phase));
  drawChart("throughput", throughputOptions, throughputData(history.points));
  state.chartJob = jobKey(sel);
  $("#timeline-note").textContent =
    `Status changes seen since ${when(history.since)}; the events below go further back.`;

  const failures = $("#failures tbody");
  failures.replaceChildren();
  for (const f of status.failures || []) {
    const row = failures.insertRow();
    cell(row, f.epoch); cell(row, f.class); cell(row, f.reason); cell(row, f.pod);
    cell(row, f.exitCode); cell(row, f.message, "message");
  }
  if (!(status.failures || []).length) cell(failures.insertRow(), "none", "hint").colSpan = 6;

  const last = checkpoints.error ? status.lastCheckpoint : checkpoints.last;
  fillFacts($("#checkpoints"), checkpoints.error
    ? [["checkpoints", checkpoints.error.message]]
    : [["location", checkpoints.location], ["every", `${checkpoints.intervalSteps} steps`],
       ["keep", checkpoints.keep], ["newest step", last ? last.step : null],
       ["newest path", last ? last.path : null], ["saved", when(last && last.time)]]);

  const eventRows = $("#events tbody");
  eventRows.replaceChildren();
  if (events.error) {
    cell(eventRows.insertRow(), `events: ${events.error.message}`, "hint").colSpan = 4;
  } else {
    for (const e of events.items) {
      const row = eventRows.insertRow();
      cell(row, when(e.time)); cell(row, e.type); cell(row, e.reason); cell(row, e.message, "message");
    }
  }
}

// --- wiring ----------------------------------------------------------------------------------
/** `#namespace/name` picks a job; its namespace becomes the list's filter if none is set, since
 * a user whose Role is in one namespace may not list jobs across all of them. */
function selectFromHash() {
  const [namespace, name] = decodeURIComponent(location.hash.slice(1)).split("/");
  state.selected = namespace && name ? { namespace, name } : null;
  if (state.selected && !$("#namespace").value.trim()) $("#namespace").value = namespace;
}

/** The list and the selected job load independently: a refused list still shows the job. */
async function refresh() {
  const results = await Promise.allSettled([refreshList(), refreshJob()]);
  const failed = results.find((r) => r.status === "rejected");
  showError(failed ? failed.reason : null);
}

function start() {
  $("#token").value = state.token;
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.token = $("#token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, state.token);
    refresh();
  });
  $("#namespace").addEventListener("change", refresh);
  $("#phase").addEventListener("change", refresh);
  window.addEventListener("hashchange", () => { selectFromHash(); refresh(); });
  new ResizeObserver(resizeCharts).observe($("main"));
  selectFromHash();
  refresh();
  setInterval(refresh, POLL_MS);
}

start();
