// ksearch ui: keeps the page current by polling a fingerprint, and sends steering edits as JSON.
// The server renders the first view into the page (summary, chart, tree, a node and its attempt); this
// script takes it over from the body's data attributes and swaps fragments in only when something changed.
// Fragments come from the server already escaped; anything this script writes itself uses textContent.
"use strict";

(() => {
  const body = document.body.dataset;
  const SEARCH = body.search;
  const API = `/api/s/${SEARCH}`;
  const ROOT = Number(body.root);
  const POLL_MS = 1500;
  const HIDDEN_POLL_MS = 6000;
  const $ = (sel) => document.querySelector(sel);
  const num = (raw) => (raw ? Number(raw) : null);

  // What the served HTML already shows: the first poll refetches nothing unless the version moved on.
  const st = {
    version: body.version || null,
    node: num(body.node),
    nodeData: null,
    attempt: num(body.attempt),
    busy: false,
    job: null, // the id of the submission being evaluated
    file: null, // {name, text} of the file read into the kernel box
    opening: 0, // counts selectNode calls: one a later call overtook opens no attempt
  };

  async function getJSON(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
    const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
    if (!r.ok) throw Object.assign(new Error(data.error || `HTTP ${r.status}`), { data });
    return data;
  }

  async function postJSON(url, body) {
    const r = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    const data = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
    if (!r.ok) throw Object.assign(new Error(data.error || `HTTP ${r.status}`), { data });
    return data;
  }

  function setLive(ok, text) {
    const el = $("#live");
    el.textContent = text;
    el.classList.toggle("offline", !ok);
  }

  function saveHash() {
    const parts = [];
    if (st.node !== null) parts.push(`node=${st.node}`);
    if (st.attempt !== null) parts.push(`attempt=${st.attempt}`);
    history.replaceState(null, "", parts.length ? `#${parts.join("&")}` : location.pathname);
  }

  function markSelected() {
    document.querySelectorAll("#tree .node.selected").forEach((el) => {
      el.classList.remove("selected");
      el.setAttribute("aria-selected", "false");
    });
    if (st.node !== null) {
      const el = document.querySelector(`#tree .node[data-node="${st.node}"]`);
      if (el) {
        el.classList.add("selected");
        el.setAttribute("aria-selected", "true");
      }
    }
    document.querySelectorAll("#node .attempt-row.selected").forEach((el) => el.classList.remove("selected"));
    if (st.attempt !== null) {
      const row = document.querySelector(`#node .attempt-row[data-attempt="${st.attempt}"]`);
      if (row) row.classList.add("selected");
    }
  }

  async function refreshView() {
    const v = await getJSON(`${API}/view`);
    $("#doing").textContent = v.doing;
    $("#summary").innerHTML = v.summary_html;
    $("#chart").innerHTML = v.chart_html;
    $("#tree").innerHTML = v.tree_html;
    st.version = v.version;
    if (st.node === null) st.node = v.search.root_id;
    markSelected();
  }

  // While another node loads, the steering buttons would act on the one shown before: they wait for it.
  function holdSteer(on) {
    document.querySelectorAll("#steer button:not(#submit-kernel-btn)").forEach((b) => { b.disabled = on; });
  }

  function fillSteer(n) {
    const panel = $("#steer");
    panel.hidden = false;
    holdSteer(false);
    $("#steer-target").textContent = `#${n.id} ${n.kind === "root" ? "root" : n.title}`;
    const intent = n.kind === "intent";
    document.querySelectorAll("#steer .intent-only").forEach((el) => { el.hidden = !intent; });
    $("#pin").textContent = n.pinned ? "Unpin" : "Pin";
    $("#veto").textContent = n.vetoed ? "Unveto" : "Veto";
    $("#prune").disabled = n.status === "pruned";
    $("#reopen").disabled = !(n.status === "pruned" || n.status === "failed" || n.status === "closed");
    // a kernel is recorded on the root, on an open intent (claimed) or on the one being refined
    const takes = n.kind === "root" || (!n.vetoed && (n.status === "open" || n.status === "active"));
    document.querySelectorAll("#steer .submit-only").forEach((el) => { el.hidden = !takes; });
    if (document.activeElement !== $("#prio")) $("#prio").value = n.priority.toFixed(2);
  }

  async function refreshNode(openDefault) {
    if (st.node === null) return;
    const want = st.node;
    const d = await getJSON(`${API}/nodes/${want}`);
    if (st.node !== want) return; // the user moved on meanwhile
    $("#node").innerHTML = d.html;
    st.nodeData = d.node;
    fillSteer(d.node);
    if (openDefault) {
      // the node's own default attempt: opening it is part of opening the node, whose message
      // was cleared when the click came; one said since (a refusal of an edit sent meanwhile) stays
      if (d.default_attempt !== null) await selectAttempt(d.default_attempt, false);
      else {
        st.attempt = null;
        $("#attempt").replaceChildren();
      }
    }
    markSelected();
    saveHash();
  }

  async function selectNode(id, attempt) {
    clearMsg(); // a message was about what was open before
    const mine = ++st.opening;
    if (!st.nodeData || st.nodeData.id !== id) holdSteer(true); // the same node again: shown already
    st.node = id;
    st.attempt = null;
    markSelected();
    try {
      await refreshNode(attempt === undefined);
      // something else was opened meanwhile (a second link followed while this one loaded): the later one wins
      if (st.opening !== mine) return;
      if (attempt !== undefined && attempt !== null) await selectAttempt(attempt);
    } catch (e) {
      $("#node").textContent = `Could not load node #${id}: ${e.message}`;
    }
  }

  async function selectAttempt(id, clear = true) {
    if (clear) clearMsg();
    st.attempt = id;
    markSelected();
    saveHash();
    try {
      const d = await getJSON(`${API}/attempts/${id}`);
      if (st.attempt !== id) return;
      $("#attempt").innerHTML = d.html;
    } catch (e) {
      $("#attempt").textContent = `Could not load attempt #${id}: ${e.message}`;
    }
  }

  async function tick() {
    if (st.busy) return;
    st.busy = true;
    try {
      const v = await getJSON(`${API}/version`);
      if (v.version !== st.version) {
        await refreshView();
        if (st.node !== null) await refreshNode(false);
      }
      setLive(true, `live · ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      setLive(false, `offline (${e.message}) · retrying`);
    } finally {
      st.busy = false;
    }
  }

  function loop() {
    const wait = document.hidden ? HIDDEN_POLL_MS : POLL_MS;
    setTimeout(async () => {
      await tick();
      loop();
    }, wait);
  }

  function clearMsg() {
    const el = $("#steer-msg");
    el.replaceChildren();
    el.classList.remove("err");
  }

  function say(text, ok, problems) {
    const el = $("#steer-msg");
    el.replaceChildren();
    el.classList.toggle("err", !ok);
    const p = document.createElement("div");
    p.textContent = text;
    el.appendChild(p);
    if (problems && problems.length) {
      const ul = document.createElement("ul");
      for (const pr of problems) {
        const li = document.createElement("li");
        li.textContent = pr;
        ul.appendChild(li);
      }
      el.appendChild(ul);
    }
  }

  async function steer(edit, done) {
    if (st.nodeData === null) return;
    const reason = $("#reason").value.trim();
    const opening = st.opening; // a message is about this node: another opened meanwhile gets none
    try {
      await postJSON(`${API}/edits`, { edits: [{ node_id: st.nodeData.id, reason, ...edit }] });
      $("#reason").value = ""; // the reason went into the edit log with this change
      st.version = null; // force the next tick to reload
      await tick(); // the buttons show the new state before the message confirms it
      if (st.opening === opening) say(done, true);
    } catch (e) {
      if (st.opening === opening) say(e.message, false, e.data && e.data.problems);
    }
  }

  // ---------------------------------------------------------------- wiring

  $("#tree").addEventListener("click", (ev) => {
    const card = ev.target.closest(".node[data-node]");
    if (card) selectNode(Number(card.dataset.node));
  });
  $("#tree").addEventListener("keydown", (ev) => {
    const card = ev.target.closest(".node[data-node]");
    if (card && (ev.key === "Enter" || ev.key === " ")) {
      ev.preventDefault();
      selectNode(Number(card.dataset.node));
    }
  });
  $("#node").addEventListener("click", (ev) => {
    const row = ev.target.closest(".attempt-row[data-attempt]");
    if (row) selectAttempt(Number(row.dataset.attempt));
  });
  $("#node").addEventListener("keydown", (ev) => {
    const row = ev.target.closest(".attempt-row[data-attempt]");
    if (row && ev.key === "Enter") selectAttempt(Number(row.dataset.attempt));
  });
  // An attempt by id alone (a chart point, a #attempt=N link): open its node, then the attempt.
  async function openAttempt(id) {
    const d = await getJSON(`${API}/attempts/${id}`).catch(() => null);
    if (d === null) return;
    await selectNode(d.node_id !== null ? d.node_id : ROOT, id);
  }
  $("#chart").addEventListener("click", async (ev) => {
    const pt = ev.target.closest("[data-attempt]");
    if (pt) await openAttempt(Number(pt.dataset.attempt));
    const declined = ev.target.closest(".declined-mark[data-node]");
    if (declined) await selectNode(Number(declined.dataset.node));
  });

  $("#set-prio").addEventListener("click", () => {
    const p = Number($("#prio").value);
    steer({ op: "update", priority: p }, `priority set to ${p.toFixed(2)}`);
  });
  $("#pin").addEventListener("click", () => {
    const on = st.nodeData && st.nodeData.pinned;
    steer({ op: on ? "unpin" : "pin" }, on ? "unpinned" : "pinned: selected before other intents");
  });
  $("#veto").addEventListener("click", () => {
    const on = st.nodeData && st.nodeData.vetoed;
    steer({ op: on ? "unveto" : "veto" }, on ? "unvetoed" : "vetoed: never selected");
  });
  $("#prune").addEventListener("click", () => steer({ op: "prune" }, "pruned"));
  $("#reopen").addEventListener("click", () => steer({ op: "reopen" }, "reopened"));

  $("#add-intent").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (st.nodeData === null) return;
    const body = {
      parent_id: st.nodeData.id,
      title: $("#intent-title").value.trim(),
      rationale: $("#intent-why").value.trim(),
      priority: Number($("#intent-prio").value),
      difficulty: Number($("#intent-diff").value),
      params: parseParams($("#intent-params").value),
      reason: $("#reason").value.trim(),
    };
    try {
      const d = await postJSON(`${API}/intents`, body);
      const n = d.nodes[0];
      say(`added intent #${n.id} under #${body.parent_id}`, true);
      $("#reason").value = "";
      $("#intent-title").value = "";
      $("#intent-why").value = "";
      $("#intent-params").value = "";
      st.version = null;
      await tick();
    } catch (e) {
      say(e.message, false, e.data && e.data.problems);
    }
  });

  // "BLOCK_N=512, layout=rows" -> {BLOCK_N: 512, layout: "rows"}: a value that reads as JSON is that value
  function parseParams(text) {
    const out = {};
    for (const item of text.split(",")) {
      const part = item.trim();
      if (!part) continue;
      const eq = part.indexOf("=");
      const key = eq > 0 ? part.slice(0, eq).trim() : part;
      const raw = eq > 0 ? part.slice(eq + 1).trim() : "";
      try { out[key] = JSON.parse(raw); } catch (_) { out[key] = raw; }
    }
    return out;
  }

  $("#budgets").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const d = await postJSON(`${API}/budgets`, { more_rounds: Number($("#more-rounds").value) });
      say(`round budget: ${d.before.rounds ?? "no limit"} -> ${d.after.rounds ?? "no limit"}. ${d.next}`, true);
      st.version = null;
      await tick();
    } catch (e) {
      say(e.message, false, e.data && e.data.problems);
    }
  });

  // ---------------------------------------------------------------- a person's kernel

  const MAX_BYTES = Number($("#submit-kernel").dataset.maxBytes);
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

  $("#kernel-file").addEventListener("change", async () => {
    const f = $("#kernel-file").files[0];
    if (!f) return;
    if (f.size > MAX_BYTES) {
      say(`${f.name} is ${f.size} bytes; a candidate may be at most ${MAX_BYTES} bytes`, false);
      $("#kernel-file").value = "";
      return;
    }
    try {
      const text = new TextDecoder("utf-8", { fatal: true }).decode(await f.arrayBuffer());
      $("#kernel-src").value = text;
      st.file = { name: f.name, text };
    } catch (_) {
      say(`${f.name} is not UTF-8 text; accepted: a UTF-8 Python file (or a Solution JSON)`, false);
      $("#kernel-file").value = "";
    }
  });

  function showJob(job) {
    $("#submit-progress").hidden = job.state !== "running";
    $("#submit-bar").value = job.fraction;
    const step = job.steps.length ? job.steps[job.steps.length - 1] : "starting";
    $("#submit-step").textContent = `evaluating your kernel for #${job.node_id}: ${step} · ${job.seconds.toFixed(0)} s`;
  }

  // Poll the submission until it is evaluated, then open the attempt it recorded.
  async function watchJob(job) {
    st.job = job.id;
    $("#submit-kernel-btn").disabled = true;
    try {
      let misses = 0; // polls in a row that failed: a busy or restarting server is given a few seconds
      while (job.state === "running") {
        showJob(job);
        await sleep(1000);
        try {
          job = await getJSON(`${API}/submissions/${job.id}`);
          misses = 0;
        } catch (e) {
          if (++misses >= 10 || (e.data && /^no submission/.test(e.data.error || ""))) throw e;
        }
      }
    } catch (e) {
      job = { state: "failed", error: `lost the submission: ${e.message}`, problems: [] };
    } finally {
      st.job = null;
      $("#submit-kernel-btn").disabled = false;
      $("#submit-progress").hidden = true;
    }
    if (job.state !== "done") {
      say(job.error, false, job.problems);
      return;
    }
    st.version = null;
    await tick();
    await openAttempt(job.attempt_id);
    const best = job.is_best ? "; it is now the search's best" : "";
    say(`your kernel is attempt #${job.attempt_id} on #${job.node_id}: ${job.status} (as ${job.language})${best}`, job.status === "ok");
  }

  $("#submit-kernel").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (st.nodeData === null || st.job !== null) return;
    const source = $("#kernel-src").value;
    if (!source.trim()) {
      say("paste a kernel or choose a file first", false);
      return;
    }
    const size = new TextEncoder().encode(source).length;
    if (size > MAX_BYTES) {
      say(`the source is ${size} bytes; a candidate may be at most ${MAX_BYTES} bytes`, false);
      return;
    }
    const body = {
      node_id: st.nodeData.id,
      source,
      language: $("#kernel-lang").value,
      name: st.file !== null && st.file.text === source ? st.file.name : "the pasted source",
    };
    clearMsg();
    try {
      await watchJob(await postJSON(`${API}/submissions`, body));
    } catch (e) {
      say(e.message, false, e.data && e.data.problems);
    }
  });

  // ---------------------------------------------------------------- start

  // #node=N&attempt=M (or either alone) opens that node and attempt; false when the address names none.
  async function openFromHash() {
    const hash = new URLSearchParams(location.hash.slice(1));
    const node = Number(hash.get("node"));
    const attempt = Number(hash.get("attempt"));
    if (node) await selectNode(node, attempt || undefined);
    else if (attempt) await openAttempt(attempt);
    else return false;
    return true;
  }
  // A link to another attempt followed on this page changes only the address's fragment.
  window.addEventListener("hashchange", () => openFromHash());

  (async () => {
    try {
      // the served node needs only its steering data, unless the address asks for another
      if (!(await openFromHash())) await refreshNode(false);
      await tick();
    } catch (e) {
      setLive(false, `offline (${e.message}) · retrying`);
    }
    loop();
  })();
})();
