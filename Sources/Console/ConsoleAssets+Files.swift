extension ConsoleAssets {
    static let indexHTML = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>bitchat-bridge console</title>
        <link rel="stylesheet" href="/console/app.css">
        <script src="/console/app.js" defer></script>
        </head>
        <body>
        <header>
          <h1>bitchat-bridge</h1>
          <nav>
            <a href="#live" data-page="live">Live</a>
            <a href="#modlog" data-page="modlog">Moderation log</a>
            <a href="#sender" data-page="sender">Sender</a>
            <a href="#settings" data-page="settings">Settings</a>
            <a href="#charts" data-page="charts">Charts</a>
            <a href="#audit" data-page="audit">Audit</a>
          </nav>
          <span id="session"></span>
        </header>
        <div id="health-strip" aria-live="polite"><span class="muted">health: …</span></div>
        <main>
          <section id="signin" hidden>
            <h2>Sign in</h2>
            <p>Actions need the console token (<code>bitchat-bridge console-token</code> on the bridge's host).</p>
            <form id="signin-form"><input id="token" type="password" autocomplete="off" placeholder="console token" size="70">
              <button type="submit">Sign in</button></form>
            <p id="signin-error" class="error"></p>
          </section>
          <section id="page-live" class="page">
            <h2>Live <span id="live-state" class="muted"></span></h2>
            <p id="live-counts"></p>
            <p id="release-result"></p>
            <table id="live-table"><thead><tr><th>time (UTC)</th><th>what</th><th>direction</th><th>channel</th><th>sender</th><th>rule and figures</th><th>text</th></tr></thead><tbody></tbody></table>
          </section>
          <section id="page-modlog" class="page" hidden>
            <h2>Moderation log</h2>
            <form id="modlog-filter" class="filters">
              <input name="search" placeholder="text search">
              <input name="sender" placeholder="sender key">
              <input name="channel" placeholder="channel">
              <select name="direction"><option value="">any direction</option><option>nostr-to-mesh</option><option>mesh-to-nostr</option></select>
              <select name="rule" id="modlog-rule"><option value="">any rule</option></select>
              <input name="since" placeholder="since (1h, 2d)" size="10">
              <input name="until" placeholder="until (10m, 2026-12-01T10:00Z)" size="22">
              <button type="submit">Filter</button>
            </form>
            <p id="modlog-note" class="muted"></p>
            <p id="modlog-release-result"></p>
            <table id="modlog-table"><thead><tr><th>time (UTC)</th><th>direction</th><th>channel</th><th>rule</th><th>sender</th><th>text</th></tr></thead><tbody></tbody></table>
            <button id="modlog-more">Older</button>
          </section>
          <section id="page-sender" class="page" hidden>
            <h2>Sender</h2>
            <form id="sender-form"><input id="sender-key" placeholder="a key as the tables show it (16 hex), or nostr:/mesh: and all 64 hex" size="75"><button type="submit">Show</button></form>
            <div id="sender-view"></div>
            <div id="sender-actions" hidden>
              <button data-action="block">Block</button> <button data-action="unblock">Unblock</button>
              <button data-action="allow">Allow</button> <button data-action="verify">Verify</button>
              <input id="sender-note" placeholder="note" size="40"> <button data-action="note">Save note</button>
            </div>
            <p id="sender-result"></p>
          </section>
          <section id="page-settings" class="page" hidden>
            <h2>Settings</h2>
            <p>Applied at once, without a restart; every change is audited.</p>
            <label><input type="checkbox" id="shadow"> Shadow mode: the spam filter logs what it would hide and hides nothing</label>
            <h3>Denylist</h3>
            <p>A message containing a keyword (any case) or matching a regular expression is hidden (rule <code>denylist</code>).</p>
            <ul id="denylist"></ul>
            <form id="denylist-form">
              <select id="deny-kind"><option value="keyword">keyword</option><option value="regex">regex</option></select>
              <input id="deny-pattern" placeholder="word or pattern" size="40">
              <button type="button" id="deny-preview">Preview</button> <button type="submit">Add</button>
            </form>
            <p id="deny-preview-result"></p>
            <p id="settings-result"></p>
            <h3>Spam limits</h3>
            <p>The spam filter's limits (the config file's <code>spam</code> keys), in force at once until the next restart. The filter
              starts afresh with them: every sender's budget full, its stored texts forgotten. A value the filter refuses is named here.</p>
            <form id="spam-form"><div id="spam-fields" class="fields"></div><button type="submit">Apply limits</button></form>
            <p id="spam-result"></p>
          </section>
          <section id="page-charts" class="page" hidden>
            <h2>Charts <span id="charts-state" class="muted"></span></h2>
            <p>The last hour, one point per minute (UTC), from the bridge's own counters (the figures of <code>/metrics</code>, read every 2 s).
              A gap is a minute without a reading. The figure beside each name is this minute's.</p>
            <div id="charts"></div>
          </section>
          <section id="page-audit" class="page" hidden>
            <h2>Audit</h2>
            <table id="audit-table"><thead><tr><th>when (UTC)</th><th>action</th><th>target</th><th>from</th><th>how</th><th>outcome</th></tr></thead><tbody></tbody></table>
          </section>
        </main>
        </body>
        </html>
        """#

    static let appCSS = #"""
        body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
        header { display: flex; gap: 1.5em; align-items: center; padding: .5em 1em; background: #1d3557; color: #fff; }
        header h1 { font-size: 1.1em; margin: 0; }
        header a { color: #fff; margin-right: 1em; }
        #health-strip { display: flex; gap: 1.2em; padding: .35em 1em; background: #eef1f5; border-bottom: 1px solid #d5dbe3; }
        #health-strip .item::before { content: "● "; }
        #health-strip .item.good::before { color: #1b7f3b; }
        #health-strip .item.bad::before { color: #b00020; }
        #health-strip .item.warn::before { color: #b26a00; }
        #health-strip .item.off::before { color: #888; }
        span.released { color: #1b7f3b; font-weight: 600; }
        main { padding: 1em; }
        table { border-collapse: collapse; width: 100%; background: #fff; }
        th, td { border-bottom: 1px solid #ddd; padding: .25em .5em; text-align: left; vertical-align: top; }
        td.text { max-width: 40em; overflow-wrap: anywhere; }
        .filters input, .filters select { margin-right: .3em; }
        .error { color: #b00020; }
        .ok { color: #1b7f3b; }
        code { background: #eee; padding: 0 .2em; }
        a.sender { font-family: monospace; }
        .muted { color: #888; font-size: .8em; font-weight: normal; }
        .fields { display: grid; grid-template-columns: repeat(auto-fill, minmax(30em, 1fr)); gap: .3em 1.5em; margin-bottom: .5em; max-width: 96em; }
        .fields label { display: flex; justify-content: space-between; align-items: center; gap: .5em; }
        .fields label span { font-family: monospace; white-space: nowrap; }
        .fields label input[type="text"] { width: 7em; flex: none; }
        tr.hidden td { background: #fdecea; }
        tr.would_hide td { background: #fff6e0; }
        tr.downlinked td, tr.published td { color: #666; }
        figure.chart { margin: 0 0 1.2em 0; background: #fff; border: 1px solid #ddd; padding: .5em; max-width: 760px; }
        figure.chart figcaption { font-weight: 600; margin-bottom: .2em; }
        figure.chart svg { display: block; width: 100%; height: auto; }
        figure.chart svg text { font-size: 10px; fill: #666; }
        figure.chart ul.legend { list-style: none; padding: 0; margin: .3em 0 0 0; display: flex; flex-wrap: wrap; gap: .3em 1.2em; }
        figure.chart ul.legend .swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; vertical-align: middle; }
        figure.chart ul.legend .now { font-weight: 600; }
        """#

    static let appJS = #"""
        "use strict";
        // The console's script: plain DOM, no framework. Text from the network is set with textContent only.
        const $ = (s) => document.querySelector(s);
        let modlogBefore = null;

        function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; }
        function utc(t) { return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19); }

        async function api(path, options) {
          const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
          const body = await response.json().catch(() => ({}));
          if (!response.ok) throw new Error(body.error || response.status);
          return body;
        }
        async function post(path, fields) {
          return api(path, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
                             body: new URLSearchParams(fields || {}).toString() });
        }

        async function refreshSession() {
          const s = await api("/api/session");
          $("#signin").hidden = s.signed_in;
          $("#session").textContent = s.signed_in ? (s.signed_in_as ? "signed in as " + s.signed_in_as : "signed in") : (s.token_exists ? "read-only: sign in to act" : "read-only: no console token");
          return s;
        }

        function show(page) {
          for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== "page-" + page;
          if (page === "audit") loadAudit();
          if (page === "settings") loadSettings();
          if (charts.timer) { clearInterval(charts.timer); charts.timer = null; }
          if (page === "charts") { loadCharts(); charts.timer = setInterval(loadCharts, 3000); }
        }

        // Each rule in words, for a moderator who does not know the filter's keys.
        const RULE_WORDS = {
          messageRate: "too many lines too fast", characterRate: "too much text too fast", linkRate: "too many links too fast",
          repeatedMessage: "the sender repeated a line", crossUserCopy: "the same line from several senders",
          repeatedCharacters: "one pattern repeated over and over", blocked: "the sender is blocked", denylist: "matches the denylist",
        };
        function explain(rule, f) {
          const words = RULE_WORDS[rule] || rule;
          const n = (v) => (typeof v === "number" ? Math.round(v * 10) / 10 : "?");
          const bucket = { messageRate: "message_bucket", characterRate: "character_bucket", linkRate: "link_bucket" }[rule];
          if (bucket && f && f[bucket]) return words + " (burst of " + n(f[bucket].capacity) + " used up: " + n(f[bucket].level) + " left, " + n(f[bucket].cost) + " needed)";
          const copies = { repeatedMessage: "repeated", crossUserCopy: "cross_user" }[rule];
          if (copies && f && f[copies]) return words + " (" + n(f[copies].count) + " near-copies, " + Math.round(100 * (f[copies].best_similarity || 0)) + "% alike)";
          const detail = figure(rule, f);
          return detail ? words + " (" + detail + ")" : words;
        }
        // The spam limits' keys in words (the settings form); an unknown key shows as it is.
        const SPAM_WORDS = {
          "enabled": "filter on", "message_bucket.capacity": "lines in a burst", "message_bucket.refill_tokens": "lines regained",
          "message_bucket.refill_seconds": "… every (s)", "character_bucket.capacity": "characters in a burst",
          "character_bucket.refill_tokens": "characters regained", "character_bucket.refill_seconds": "… every (s)",
          "link_bucket.capacity": "links in a burst", "link_bucket.refill_tokens": "links regained", "link_bucket.refill_seconds": "… every (s)",
          "near_copy_threshold": "near-copy: at least this alike (0–1)", "repeat_window_seconds": "copies counted over (s)",
          "repeated_message_prior_copies": "own copies allowed before hiding", "cross_user_other_senders": "other senders allowed the same line",
          "cross_user_min_length": "shortest line checked for swarms", "repeated_characters_min_length": "shortest line checked for patterns",
          "autocorrelation_threshold": "pattern threshold (0–1)", "timestamp_clamp_seconds": "clock slack (s)",
        };

        // Relays, mesh, the downlink queue, the courier gateway and the filter at a glance, every 10 s.
        async function refreshHealth() {
          const strip = $("#health-strip"); const items = [];
          const item = (state, text) => items.push(el("span", text, "item " + state));
          try {
            const h = await fetch("/healthz", { credentials: "same-origin" }).then((r) => r.json());
            for (const c of h.checks || []) item(c.ok ? "good" : "bad", c.name + ": " + (c.ok ? "ok" : "down") + (c.detail ? " — " + c.detail : ""));
            // Every stage of the site (bridges holding the operator key): heard within three heartbeats or not.
            for (const st of h.site || []) {
              if (st.this) continue;
              const f = st.status || {};
              item(st.heard ? "good" : "bad", "stage " + st.stage + ": " + (st.heard ? "heard " : "NOT heard for ") + st.seen_s_ago + " s"
                + (st.heard ? " ago, " + f.relays + " relays, " + f.mesh_peers + " mesh peers, queue " + f.queue : ""));
            }
          } catch (e) { item("bad", "health: no answer"); }
          try {
            const m = await fetch("/metrics", { credentials: "same-origin" }).then((r) => r.text());
            const depth = /bitchat_bridge_queue_depth\{queue="downlink"\} (\d+)/.exec(m);
            if (depth) item(Number(depth[1]) >= 50 ? "warn" : "good", "downlink queue: " + depth[1] + " waiting");
            // The courier gateway (private mail): counts only, never whose.
            const watched = /bitchat_bridge_courier_watched_peers (\d+)/.exec(m);
            const held = /bitchat_bridge_courier_mail\{state="held"\} (\d+)/.exec(m);
            const waiting = /bitchat_bridge_courier_mail\{state="pending"\} (\d+)/.exec(m);
            item(watched ? "good" : "off", watched
              ? "courier: " + watched[1] + " phones watched, " + (held ? held[1] : 0) + " held, " + (waiting ? waiting[1] : 0) + " waiting"
              : "courier: off");
          } catch (e) {}
          try {
            const s = await api("/api/settings");
            const on = s.spam && s.spam.enabled !== false;
            item(!on ? "bad" : s.shadow ? "warn" : "good", "spam filter: " + (!on ? "off" : s.shadow ? "shadow (logs, hides nothing)" : "on"));
          } catch (e) {}
          strip.replaceChildren(...items);
        }

        // The rule's key figure (the same reading as `bitchat-bridge modlog`).
        function figure(rule, f) {
          if (!f || typeof f !== "object") return "";
          const n = (v) => (typeof v === "number" ? Math.round(v * 1000) / 1000 : "?");
          const bucket = { messageRate: "message_bucket", characterRate: "character_bucket", linkRate: "link_bucket" }[rule];
          if (bucket && f[bucket]) return "needs " + n(f[bucket].cost) + ", has " + n(f[bucket].level) + "/" + n(f[bucket].capacity);
          const copies = { repeatedMessage: "repeated", crossUserCopy: "cross_user" }[rule];
          if (copies && f[copies]) return n(f[copies].count) + " copies, sim " + n(f[copies].best_similarity);
          if (rule === "repeatedCharacters" && f.autocorrelation) return "A(" + n(f.autocorrelation.shift) + ") = " + n(f.autocorrelation.value);
          if (rule === "blocked" && typeof f.identity === "string") return f.identity.slice(0, 24);
          const kind = rule === "denylist" ? Object.keys(f)[0] : undefined;
          if (kind) return kind + " '" + f[kind] + "'";
          return "";
        }

        const live = { seq: 0, source: null, counts: {} };
        function senderLink(direction, sender) {
          const a = el("a", sender.slice(0, 16), "sender"); a.href = "#sender";
          a.addEventListener("click", () => { $("#sender-key").value = (direction === "mesh-to-nostr" ? "mesh:" : "nostr:") + sender; show("sender"); loadSender(); });
          return a;
        }
        function addActivity(a) {
          const key = a.kind + (a.rule ? " " + a.rule : "");
          live.counts[key] = (live.counts[key] || 0) + 1;
          $("#live-counts").textContent = Object.keys(live.counts).sort().map((k) => k + ": " + live.counts[k]).join(" · ");
          const tr = el("tr", undefined, a.kind);
          const who = el("td"); if (a.sender) who.append(senderLink(a.direction, a.sender));
          if (a.display_name) who.append(el("span", " " + a.display_name));
          tr.append(el("td", utc(a.at)), el("td", a.kind.replace("_", " ") + (a.form ? " (" + a.form + ")" : "")), el("td", a.direction), el("td", a.channel), who,
                    el("td", a.rule ? explain(a.rule, a.figures) : "", "rule"), el("td", a.text === null ? (a.kind === "downlinked" || a.kind === "published" ? a.message_id.slice(0, 16) : "") : a.text, "text"));
          tr.dataset.messageId = a.message_id;
          if (a.kind === "hidden") {
            const b = el("button", "Release", "release"); b.type = "button";
            b.addEventListener("click", () => release(a.message_id));
            tr.children[1].append(" ", b);
          }
          const tbody = $("#live-table tbody");
          tbody.insertBefore(tr, tbody.firstChild);
          while (tbody.children.length > 500) tbody.removeChild(tbody.lastChild);
        }
        async function release(id) {
          const say = (text, cls) => { for (const p of ["#release-result", "#modlog-release-result"]) { $(p).textContent = text; $(p).className = cls; } };
          try { await post("/api/release", { message_id: id });
                say("released " + id.slice(0, 16) + ": it takes the normal path (loop rules, budget)", "ok");
                if (!$("#page-modlog").hidden) loadModlog(false); }
          catch (e) { say("not released: " + e.message, "error"); }
        }
        function connectLive() {
          const source = new EventSource("/api/live" + (live.seq ? "?after=" + live.seq : ""));
          live.source = source;
          source.addEventListener("open", () => { $("#live-state").textContent = "connected"; });
          source.addEventListener("activity", (e) => { live.seq = Number(e.lastEventId) || live.seq; addActivity(JSON.parse(e.data)); });
          source.addEventListener("error", () => {
            $("#live-state").textContent = "reconnecting";
            source.close();
            setTimeout(connectLive, 1000);
          });
        }

        async function loadSettings() {
          const s = await api("/api/settings");
          $("#shadow").checked = s.shadow; $("#shadow").disabled = !s.shadow_settable;
          const ul = $("#denylist"); ul.replaceChildren();
          for (const entry of s.denylist) {
            const kind = Object.keys(entry)[0]; const li = el("li", kind + ": " + entry[kind] + " ");
            const b = el("button", "Remove"); b.type = "button";
            b.addEventListener("click", () => changeDenylist("remove", kind, entry[kind]));
            li.append(b); ul.append(li);
          }
          renderSpam(s.spam, s.spam_settable);
        }
        // The spam limits form: one field per key of the `spam` object the bridge reports (nested buckets as
        // message_bucket.capacity …), so the form follows the filter's own keys. Shadow mode is its own setting.
        function renderSpam(spam, settable) {
          const box = $("#spam-fields"); box.replaceChildren();
          const add = (path, value) => {
            if (path === "shadow_mode") return;
            if (value !== null && typeof value === "object") { for (const k of Object.keys(value)) add(path + "." + k, value[k]); return; }
            const label = el("label"); label.append(el("span", SPAM_WORDS[path] || path)); label.title = path;
            const input = document.createElement("input"); input.name = path; input.dataset.path = path; input.disabled = !settable;
            if (typeof value === "boolean") { input.type = "checkbox"; input.checked = value; }
            else { input.type = "text"; input.inputMode = "decimal"; input.size = 10; input.value = String(value); }
            label.append(input); box.append(label);
          };
          for (const k of Object.keys(spam || {})) add(k, spam[k]);
          for (const b of $("#spam-form").querySelectorAll("button")) b.disabled = !settable;
        }
        async function applySpam() {
          const spam = {};
          for (const input of $("#spam-fields").querySelectorAll("input")) {
            const parts = input.dataset.path.split(".");
            let o = spam; for (const p of parts.slice(0, -1)) o = o[p] = o[p] || {};
            const v = input.value.trim();
            // A number when it reads as one; anything else is sent as typed, for the filter to name what is wrong.
            o[parts[parts.length - 1]] = input.type === "checkbox" ? input.checked : (v !== "" && !isNaN(Number(v)) ? Number(v) : v);
          }
          try {
            await post("/api/spam", { json: JSON.stringify(spam) });
            await loadSettings();
            $("#spam-result").textContent = "spam limits applied"; $("#spam-result").className = "ok";
          } catch (e) { $("#spam-result").textContent = "not applied: " + e.message; $("#spam-result").className = "error"; }
        }

        async function changeDenylist(op, kind, pattern) {
          try { await post("/api/denylist", { op: op, kind: kind, pattern: pattern });
                $("#settings-result").textContent = "denylist " + op + ": " + pattern; $("#settings-result").className = "ok"; }
          catch (e) { $("#settings-result").textContent = e.message; $("#settings-result").className = "error"; }
          loadSettings();
        }

        // The rule filter's choices come from the bridge (the judge's own list of rules), not from this page.
        async function loadModlogRules() {
          const r = await api("/api/modlog/rules");
          const select = $("#modlog-rule");
          for (const rule of r.rules) { const o = el("option", rule); o.value = rule; select.append(o); }
          $("#modlog-note").textContent = "Every hide is a row: the operator's block list and denylist, and the spam filter's rules.";
        }

        async function loadModlog(append) {
          const form = new FormData($("#modlog-filter"));
          const q = new URLSearchParams();
          for (const [k, v] of form.entries()) if (v) q.set(k, v);
          if (append && modlogBefore) q.set("before", modlogBefore);
          q.set("limit", "50");
          const body = await api("/api/modlog?" + q.toString());
          const tbody = $("#modlog-table tbody");
          if (!append) tbody.replaceChildren();
          for (const r of body.records) {
            const tr = el("tr"); tr.dataset.messageId = r.message_id;
            const rule = el("td", explain(r.rule, r.figures) + (r.shadow ? " (shadow)" : ""), "rule");
            // A release mark (who, when), or the Release button of a hide not released yet.
            if (r.released_at) { rule.append(" ", el("span", "released by " + r.released_by + " " + utc(r.released_at), "released")); tr.className = "released"; }
            else if (!r.shadow) { const b = el("button", "Release", "release"); b.type = "button"; b.addEventListener("click", () => release(r.message_id)); rule.append(" ", b); }
            tr.append(el("td", utc(r.judged_at)), el("td", r.direction), el("td", r.channel), rule);
            const td = el("td"); const a = el("a", r.sender.slice(0, 16), "sender"); a.href = "#sender";
            a.addEventListener("click", () => { $("#sender-key").value = (r.direction === "mesh-to-nostr" ? "mesh:" : "nostr:") + r.sender; show("sender"); loadSender(); });
            td.append(a); tr.append(td, el("td", r.text === null ? "sha256:" + r.text_sha256.slice(0, 16) : r.text, "text"));
            tbody.append(tr);
            modlogBefore = r.id;
          }
          $("#modlog-more").hidden = body.records.length < 50;
        }

        // Where a mark in force comes from when it is the site's: which stage, who, when.
        function siteMark(r, set, cleared) {
          return r ? " (site: " + (r.on ? set : cleared) + " on " + r.stage + " by " + r.by + ", " + utc(r.at) + " UTC)" : "";
        }

        async function loadSender() {
          const key = $("#sender-key").value.trim();
          const view = $("#sender-view"); view.replaceChildren();
          $("#sender-result").textContent = "";
          try {
            const s = await api("/api/senders/" + encodeURIComponent(key));
            const dl = el("dl");
            for (const [k, v] of [["key", s.key], ["display names", (s.display_names || []).join(", ") || "—"],
                                  ["nickname", s.nickname || "—"],
                                  ["blocked", String(s.blocked_now !== undefined ? s.blocked_now : !!s.blocked) + siteMark(s.site && s.site.block, "blocked", "unblocked")],
                                  ["allowed", String(s.allowed_now !== undefined ? s.allowed_now : !!s.allowed) + siteMark(s.site && s.site.allow, "allowed", "unallowed")],
                                  ["verified", String(!!s.verified)], ["note", s.notes || "—"],
                                  ["first seen", s.first_seen_ms ? utc(s.first_seen_ms / 1000) : "—"],
                                  ["last seen (day, UTC)", s.last_seen_day ? utc(s.last_seen_day * 86400).slice(0, 10) : "—"]]) {
              dl.append(el("dt", k), el("dd", v));
            }
            view.append(dl, el("h3", "Recent verdicts"));
            const ul = el("ul");
            for (const r of s.verdicts) ul.append(el("li", utc(r.judged_at) + " " + r.rule + " " + (r.text || "")));
            view.append(ul);
            $("#sender-actions").hidden = false;
          } catch (e) { view.append(el("p", String(e.message), "error")); $("#sender-actions").hidden = true; }
        }

        async function senderAction(action) {
          const key = $("#sender-key").value.trim();
          try {
            await post("/api/senders/" + encodeURIComponent(key) + "/" + action, action === "note" ? { text: $("#sender-note").value } : {});
            $("#sender-result").textContent = action + ": done"; $("#sender-result").className = "ok";
            loadSender().then(() => { $("#sender-result").textContent = action + ": done"; });
          } catch (e) { $("#sender-result").textContent = action + ": " + e.message; $("#sender-result").className = "error"; }
        }

        // Charts: inline SVG drawn here (no library). Each series is a path (broken at minutes without a reading)
        // with a dot per minute; its element carries data-series and data-now (this minute's value) for readers.
        const charts = { timer: null };
        const palette = ["#1d3557", "#e63946", "#2a9d8f", "#f4a261", "#6a4c93", "#8ab17d", "#e76f51", "#457b9d", "#b5838d", "#264653"];
        const SVGNS = "http://www.w3.org/2000/svg";
        function svgEl(tag, attrs) { const e = document.createElementNS(SVGNS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; }
        function chart(id, title, minutes, series) {
          const W = 720, H = 170, L = 40, R = 10, T = 10, B = 22;
          const fig = el("figure", undefined, "chart"); fig.id = "chart-" + id;
          fig.append(el("figcaption", title));
          const svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
          let max = 1;
          for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
          const x = (i) => L + (W - L - R) * i / Math.max(1, minutes.length - 1);
          const y = (v) => T + (H - T - B) * (1 - v / max);
          for (const g of [0, max / 2, max]) {
            svg.append(svgEl("line", { x1: L, x2: W - R, y1: y(g), y2: y(g), stroke: "#e5e5e5" }));
            const label = svgEl("text", { x: L - 4, y: y(g) + 3, "text-anchor": "end" }); label.textContent = String(Math.round(g * 10) / 10); svg.append(label);
          }
          for (const i of [0, Math.floor((minutes.length - 1) / 2), minutes.length - 1]) {
            if (minutes[i] === undefined) continue;
            const label = svgEl("text", { x: x(i), y: H - 6, "text-anchor": i === 0 ? "start" : (i === minutes.length - 1 ? "end" : "middle") });
            label.textContent = utc(minutes[i]).slice(11, 16); svg.append(label);
          }
          const legend = el("ul", undefined, "legend");
          series.forEach((s, n) => {
            const colour = palette[n % palette.length];
            let d = "", pen = false;
            const dots = svgEl("g", { fill: colour });
            s.values.forEach((v, i) => {
              if (v === null) { pen = false; return; }
              d += (pen ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1) + " "; pen = true;
              dots.append(svgEl("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2 }));
            });
            const now = s.values.length ? s.values[s.values.length - 1] : null;
            const path = svgEl("path", { d: d.trim() || "M0 0", fill: "none", stroke: colour, "stroke-width": 1.5, "stroke-dasharray": s.dashed ? "4 3" : "none" });
            path.dataset.series = s.name; path.dataset.now = now === null ? "" : String(now);
            svg.append(path, dots);
            const li = el("li"); li.dataset.series = s.name; li.dataset.now = path.dataset.now;
            const swatch = el("span", undefined, "swatch"); swatch.style.background = colour;
            li.append(swatch, el("span", s.name + ": "), el("span", now === null ? "—" : String(now), "now"));
            legend.append(li);
          });
          if (!series.length) legend.append(el("li", "nothing yet", "muted"));
          fig.append(svg, legend);
          return fig;
        }
        async function loadCharts() {
          try {
            const c = await api("/api/charts");
            const m = c.minutes;
            $("#charts").replaceChildren(
              chart("forwarded", "Forwarded per minute, by direction", m, c.forwarded.map((s) => ({ name: s.direction, values: s.values }))),
              chart("hidden", "Hidden per minute, by direction and rule", m, c.hidden.map((s) => ({ name: s.direction + " " + s.rule, values: s.values }))),
              chart("relays", "Relays up (lowest in the minute)", m, [{ name: "up", values: c.relays_up }, { name: "configured", values: c.relays_configured, dashed: true }]),
              chart("peers", "Mesh peers", m, [{ name: "peers", values: c.mesh_peers }]),
              chart("queues", "Queue depths (highest in the minute)", m, c.queue_depths.map((s) => ({ name: s.queue, values: s.values }))));
            $("#charts-state").textContent = "updated " + utc(c.now).slice(11, 19) + " UTC";
          } catch (e) { $("#charts-state").textContent = e.message; }
        }

        async function loadAudit() {
          const body = await api("/api/audit?limit=200");
          const tbody = $("#audit-table tbody"); tbody.replaceChildren();
          for (const a of body.entries) {
            const tr = el("tr");
            tr.append(el("td", utc(a.at)), el("td", a.action), el("td", a.target), el("td", a.remote), el("td", a.principal), el("td", a.outcome));
            tbody.append(tr);
          }
        }

        document.addEventListener("DOMContentLoaded", () => {
          for (const a of document.querySelectorAll("nav a")) a.addEventListener("click", () => show(a.dataset.page));
          $("#signin-form").addEventListener("submit", async (e) => {
            e.preventDefault();
            try { await post("/console/login", { token: $("#token").value }); $("#token").value = ""; $("#signin-error").textContent = ""; refreshSession(); }
            catch (err) { $("#signin-error").textContent = err.message; }
          });
          $("#modlog-filter").addEventListener("submit", (e) => { e.preventDefault(); modlogBefore = null; loadModlog(false); });
          $("#modlog-more").addEventListener("click", () => loadModlog(true));
          $("#sender-form").addEventListener("submit", (e) => { e.preventDefault(); loadSender(); });
          for (const b of document.querySelectorAll("#sender-actions button")) b.addEventListener("click", () => senderAction(b.dataset.action));
          $("#shadow").addEventListener("change", async () => {
            try { const r = await post("/api/settings", { shadow: $("#shadow").checked ? "on" : "off" });
                  $("#settings-result").textContent = "shadow mode " + (r.shadow ? "on" : "off"); $("#settings-result").className = "ok"; }
            catch (e) { $("#settings-result").textContent = e.message; $("#settings-result").className = "error"; loadSettings(); }
          });
          $("#deny-preview").addEventListener("click", async () => {
            try {
              const q = new URLSearchParams({ kind: $("#deny-kind").value, pattern: $("#deny-pattern").value });
              const p = await api("/api/denylist/preview?" + q.toString());
              $("#deny-preview-result").replaceChildren(el("span", "would have hidden " + p.would_hide + " of " + p.judged +
                " messages judged in the last hour (" + p.already_hidden + " hidden anyway)"));
              const ul = el("ul"); for (const x of p.examples) ul.append(el("li", utc(x.at) + " " + x.text)); $("#deny-preview-result").append(ul);
            } catch (e) { $("#deny-preview-result").textContent = e.message; }
          });
          $("#denylist-form").addEventListener("submit", (e) => { e.preventDefault(); changeDenylist("add", $("#deny-kind").value, $("#deny-pattern").value); });
          $("#spam-form").addEventListener("submit", (e) => { e.preventDefault(); applySpam(); });
          refreshSession().then(() => { connectLive(); loadModlogRules().catch(() => {}); loadModlog(false); }).catch((e) => { $("#session").textContent = e.message; });
          refreshHealth(); setInterval(refreshHealth, 10000);
          show((location.hash || "#live").slice(1));
        });
        """#
}
