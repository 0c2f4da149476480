// loopguard serve: the dashboard's one script (the overview at `/` and the
// task page at `/tasks/{task}`). No library, no build step.
//
// Security: every string that comes from the events (task ids, agent names,
// reasons, directives) is written with `textContent` (through `h` below),
// never as HTML. The token, when the server needs one, is kept in this tab's
// sessionStorage and sent as `Authorization: Bearer` on every request for
// data; a `#token=...` fragment in the address is moved there and removed.
'use strict';

(function () {
  const TOKEN_KEY = 'loopguard.token';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  // A restrained categorical palette for the detection kinds.
  const PALETTE = ['#4e79a7', '#e8853a', '#d95f5f', '#5aa5a0', '#5b9b4c', '#c9a227', '#9c6fa0', '#e58fa0', '#8c6d58', '#9aa3ad'];
  const REFRESH_MS = 2000;
  const SHOWN_DETECTIONS = 40;

  // ---- small helpers -----------------------------------------------------

  // An element with attributes (`class`, `data-*`, `title`, `href`, ...) and
  // children (nodes, or strings written as text).
  function h(tag, attrs, children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function s(tag, attrs, children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    append(node, children);
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      node.setAttribute(key, String(value));
    }
  }

  function append(node, children) {
    if (children === null || children === undefined) return;
    for (const child of Array.isArray(children) ? children : [children]) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
    }
  }

  function byId(id) { return document.getElementById(id); }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function replace(node, children) { clear(node); append(node, children); }

  function taskHref(task) { return '/tasks/' + encodeURIComponent(task); }

  function statusBadge(status) {
    return h('span', { class: 'badge status-' + status, 'data-status': status }, status.replace('_', ' '));
  }

  function severityBadge(severity) {
    return h('span', { class: 'sev sev-' + severity }, severity);
  }

  function actionChip(action) {
    return h('span', { class: 'action action-' + action, title: 'action' }, action);
  }

  function plural(count, one, many) { return count + ' ' + (count === 1 ? one : many); }

  function formatTime(text) {
    const date = new Date(text);
    if (isNaN(date)) return String(text);
    return date.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }

  function ago(text) {
    const date = new Date(text);
    if (isNaN(date)) return String(text);
    const seconds = Math.round((Date.now() - date.getTime()) / 1000);
    if (seconds < 0) return formatTime(text);
    if (seconds < 45) return 'just now';
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return minutes + ' min ago';
    const hours = Math.round(minutes / 60);
    if (hours < 48) return hours + ' h ago';
    return formatTime(text);
  }

  function when(text) {
    return h('time', { class: 'when', datetime: text, title: formatTime(text) }, ago(text));
  }

  function lineList(lines) {
    if (!lines || lines.length === 0) return '';
    const shown = lines.slice(-12);
    return (lines.length > shown.length ? '… ' : '') + shown.join(', ');
  }

  // US dollars: cents from a dollar up, three significant digits below.
  function dollars(value) {
    if (value === null || value === undefined) return '—';
    if (value >= 1) return '$' + value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    return '$' + value.toLocaleString('en-US', { maximumSignificantDigits: 3 });
  }

  function tokenCount(totals) { return totals.input_tokens + totals.output_tokens; }

  // "N% of the total", or null when there is no total.
  function share(part, whole) {
    return whole ? Math.round((100 * (part || 0)) / whole) + '% of the total' : null;
  }

  // A round top for an axis: 1, 2, 2.5 or 5 times a power of ten, above `value`.
  function niceCeil(value) {
    if (!(value > 0)) return 1;
    const step = Math.pow(10, Math.floor(Math.log10(value)));
    for (const factor of [1, 2, 2.5, 5, 10]) {
      if (factor * step >= value) return factor * step;
    }
    return value;
  }

  // One card: label, value shown, note; `data-spend` names it, `data-value` holds the raw number.
  function spendCard(label, key, raw, shown, note, tone) {
    return h('div', { class: 'card ' + (tone || ''), 'data-spend': key, 'data-value': raw === null || raw === undefined ? '' : raw }, [
      h('div', { class: 'label' }, label),
      h('div', { class: 'value' }, shown),
      note ? h('div', { class: 'note' }, note) : null,
    ]);
  }

  // ---- the token ---------------------------------------------------------

  function takeTokenFromFragment() {
    const match = /(?:^#|&)token=([^&]*)/.exec(window.location.hash);
    if (!match) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    } catch (err) {
      // No session storage: the token cannot be kept.
    }
    history.replaceState(null, '', window.location.pathname + window.location.search);
  }

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (err) { return null; }
  }

  function headers() {
    const value = token();
    return value ? { Authorization: 'Bearer ' + value } : {};
  }

  class NeedToken extends Error {}

  async function api(path) {
    const response = await fetch(path, { headers: headers(), cache: 'no-store' });
    if (response.status === 401) throw new NeedToken('this server needs its token');
    if (!response.ok) {
      let message = response.status + ' ' + response.statusText;
      try { message = (await response.json()).error || message; } catch (err) { /* not JSON */ }
      throw new Error(path + ': ' + message);
    }
    return response.json();
  }

  // Shows the token form; resolves when a token was entered.
  let tokenWanted = null;
  function askForToken(reason) {
    const form = byId('token-form');
    const error = byId('token-error');
    form.hidden = false;
    document.body.dataset.locked = 'true';
    setLive('offline', 'needs the token');
    if (reason) {
      error.textContent = reason;
      error.hidden = false;
    }
    byId('token-input').focus();
    if (!tokenWanted) {
      tokenWanted = new Promise((resolve) => {
        form.addEventListener('submit', function onSubmit(event) {
          event.preventDefault();
          const value = byId('token-input').value.trim();
          if (!value) return;
          try { sessionStorage.setItem(TOKEN_KEY, value); } catch (err) { /* kept nowhere */ }
          form.hidden = true;
          error.hidden = true;
          delete document.body.dataset.locked;
          setLive('connecting', 'connecting');
          form.removeEventListener('submit', onSubmit);
          tokenWanted = null;
          resolve();
        });
      });
    }
    return tokenWanted;
  }

  function showError(err) {
    const banner = byId('load-error');
    if (!err) { banner.hidden = true; return; }
    banner.textContent = 'Cannot load the data: ' + (err.message || err);
    banner.hidden = false;
  }

  // Runs `load` (a refresh of the page's data); on 401 asks for the token and
  // tries again.
  async function guarded(load) {
    for (;;) {
      try {
        await load();
        showError(null);
        return true;
      } catch (err) {
        if (err instanceof NeedToken) {
          await askForToken(token() ? 'The token was refused; enter it again.' : null);
          continue;
        }
        showError(err);
        return false;
      }
    }
  }

  // ---- the live feed -----------------------------------------------------

  function setLive(state, text) {
    const live = byId('live');
    live.dataset.state = state;
    byId('live-text').textContent = text;
  }

  // Reads `GET /v1/live` (server-sent events) with fetch, so that the token
  // can be sent; calls `onDecision` for each decision and `onGap` when the
  // feed skipped some; reconnects with a growing delay.
  function follow(onDecision, onGap) {
    let seen = 0;
    let delay = 1000;
    async function connect() {
      let response;
      try {
        response = await fetch('/v1/live', { headers: { ...headers(), Accept: 'text/event-stream' }, cache: 'no-store' });
      } catch (err) {
        return retry();
      }
      if (response.status === 401) {
        setLive('offline', 'needs the token');
        await askForToken(null);
        return connect();
      }
      if (!response.ok || !response.body) return retry();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let name = 'message';
            const data = [];
            for (const line of block.split('\n')) {
              if (line.startsWith('event:')) name = line.slice(6).trim();
              else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
            }
            if (name === 'ready') {
              delay = 1000;
              setLive('live', seen ? 'live · ' + plural(seen, 'decision', 'decisions') : 'live');
            } else if (name === 'decision' && data.length) {
              let decision;
              try { decision = JSON.parse(data.join('\n')); } catch (err) { continue; }
              seen += 1;
              setLive('live', 'live · ' + plural(seen, 'decision', 'decisions'));
              onDecision(decision);
            } else if (name === 'lagged') {
              onGap();
            }
          }
        }
      } catch (err) {
        // The connection broke: reconnect below.
      }
      return retry();
    }
    function retry() {
      setLive('reconnecting', 'reconnecting');
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
      // Decisions may have been missed while away.
      onGap();
    }
    connect();
  }

  // Calls `refresh` at most every REFRESH_MS, the last call always honoured.
  function throttled(refresh) {
    let timer = null;
    let again = false;
    let last = 0;
    return function () {
      if (timer) { again = true; return; }
      const wait = Math.max(0, last + REFRESH_MS - Date.now());
      timer = setTimeout(async function run() {
        last = Date.now();
        again = false;
        await guarded(refresh);
        timer = null;
        if (again) { again = false; timer = setTimeout(run, REFRESH_MS); }
      }, wait);
    };
  }

  // ---- the overview ------------------------------------------------------

  function kindColors(series) {
    const colors = new Map();
    series.forEach((entry, at) => colors.set(entry.kind, PALETTE[at % PALETTE.length]));
    return colors;
  }

  function renderTotals(data) {
    const by = data.totals.by_status;
    const gated = (by.escalated || 0) + (by.paused || 0);
    const cards = [
      ['Tasks', data.totals.tasks, '', 'tasks'],
      ['Active', by.active || 0, 'ok', 'active'],
      ['Gated', gated, gated ? 'warn' : '', 'gated'],
      ['Aborted stuck', by.aborted_stuck || 0, by.aborted_stuck ? 'bad' : '', 'aborted'],
      ['Completed', by.completed || 0, '', 'completed'],
      ['Detections', data.totals.detections, '', 'detections'],
    ];
    replace(byId('totals'), cards.map(([label, value, tone, key]) =>
      h('div', { class: 'card ' + tone, 'data-total': key, 'data-value': value }, [
        h('div', { class: 'label' }, label),
        h('div', { class: 'value' }, String(value)),
      ])));
  }

  let previousActivity = new Map();
  function renderTasks(data) {
    const body = byId('tasks').tBodies[0];
    const rows = data.tasks.map((task) => {
      const last = task.last_detection;
      const fresh = previousActivity.size > 0 && previousActivity.get(task.task) !== task.last_activity;
      const row = h('tr', {
        class: 'task-row' + (fresh ? ' fresh' : ''),
        'data-task': task.task,
        'data-status': task.status,
        'data-loop-count': task.loop_count,
        'data-pivots': task.pivots,
        'data-detections': task.detections,
        'data-last-kind': last ? last.kind : '',
        'data-last-line': last ? last.line : '',
      }, [
        h('td', null, h('a', { class: 'task-link', href: taskHref(task.task) }, task.task)),
        h('td', null, statusBadge(task.status)),
        h('td', { class: 'num' + (task.loop_count ? '' : ' zero') }, String(task.loop_count)),
        h('td', { class: 'num' + (task.pivots ? '' : ' zero') }, String(task.pivots)),
        h('td', { class: 'num' + (task.detections ? '' : ' zero') }, String(task.detections)),
        h('td', null, last
          ? [h('span', { class: 'kind' }, last.kind), h('span', { class: 'line-ref' }, 'line ' + last.line)]
          : h('span', { class: 'zero' }, '—')),
        h('td', null, when(task.last_activity)),
      ]);
      row.addEventListener('click', (event) => {
        if (event.target.closest('a')) return;
        window.location.href = taskHref(task.task);
      });
      return row;
    });
    replace(body, rows);
    previousActivity = new Map(data.tasks.map((task) => [task.task, task.last_activity]));
    byId('tasks-empty').hidden = data.tasks.length > 0;
    const hint = byId('tasks-hint');
    hint.textContent = data.tasks.length < data.totals.tasks
      ? 'The ' + data.tasks.length + ' of ' + data.totals.tasks + ' tasks with the newest activity. Click a task for its timeline and cycle log.'
      : 'Newest activity first. Click a task for its timeline and cycle log.';
  }

  function niceMax(value) {
    if (value <= 4) return Math.max(1, value);
    const step = Math.pow(10, Math.floor(Math.log10(value)));
    for (const factor of [1, 2, 2.5, 5, 10]) {
      if (factor * step >= value) return factor * step;
    }
    return value;
  }

  function clock(ms) {
    return new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  }

  function renderChart(data, colors) {
    const timeline = data.timeline;
    const start = new Date(timeline.start).getTime();
    const end = new Date(timeline.end).getTime();
    const buckets = timeline.series.length ? timeline.series[0].counts.length : 60;
    const width = 640;
    const height = 270;
    const left = 34;
    const right = 10;
    const top = 10;
    const bottom = 26;
    const plotW = width - left - right;
    const plotH = height - top - bottom;
    const totals = new Array(buckets).fill(0);
    for (const entry of timeline.series) entry.counts.forEach((count, at) => { totals[at] += count; });
    const max = niceMax(Math.max(0, ...totals));
    const svg = s('svg', { viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'aria-label': 'Detections per kind per minute', 'data-buckets': buckets });
    const ticks = max <= 4 ? max : 4;
    for (let i = 0; i <= ticks; i++) {
      const value = (max * i) / ticks;
      const y = top + plotH - (plotH * i) / ticks;
      svg.appendChild(s('line', { class: i === 0 ? 'axis' : 'grid', x1: left, x2: width - right, y1: y, y2: y }));
      svg.appendChild(s('text', { x: left - 6, y: y + 4, 'text-anchor': 'end' }, String(Math.round(value * 10) / 10)));
    }
    const slot = plotW / buckets;
    const barW = Math.max(1, slot - 2);
    for (let at = 0; at <= buckets; at += 10) {
      const x = left + at * slot;
      const anchor = at === 0 ? 'start' : at >= buckets ? 'end' : 'middle';
      svg.appendChild(s('line', { class: 'axis', x1: x, x2: x, y1: top + plotH, y2: top + plotH + 4 }));
      svg.appendChild(s('text', { x: x, y: height - 8, 'text-anchor': anchor }, clock(start + at * 60000)));
    }
    for (let at = 0; at < buckets; at++) {
      let y = top + plotH;
      for (const entry of timeline.series) {
        const count = entry.counts[at];
        if (!count) continue;
        const barH = (plotH * count) / max;
        y -= barH;
        svg.appendChild(s('rect', {
          x: left + at * slot + 1, y: y, width: barW, height: Math.max(barH - 1, 1), rx: 1.5,
          fill: colors.get(entry.kind), 'data-kind': entry.kind, 'data-count': count,
        }, s('title', null, entry.kind + ': ' + count + ' at ' + clock(start + at * 60000))));
      }
    }
    replace(byId('chart'), svg);
    byId('chart-range').textContent = 'Per minute, ' + clock(start) + '–' + clock(end) +
      (timeline.series.length || data.totals.detections ? ' (the hour up to the latest detection)' : ' (the last hour)');
    replace(byId('legend'), timeline.series.length
      ? timeline.series.map((entry) => h('li', { 'data-kind': entry.kind, 'data-total': entry.total }, [
        h('span', { class: 'swatch', 'data-color': colors.get(entry.kind) }),
        h('span', { class: 'kind' }, entry.kind),
        h('span', { class: 'count' }, String(entry.total)),
      ]))
      : h('li', { class: 'empty' }, 'No detections in this hour.'));
    // Swatch colours through the CSSOM (allowed by the CSP, unlike style attributes).
    for (const swatch of byId('legend').querySelectorAll('.swatch')) swatch.style.background = swatch.dataset.color;
  }

  function renderMatrix(data) {
    const matrix = data.agents;
    const wrap = byId('matrix');
    if (matrix.agents.length === 0) {
      replace(wrap, h('p', { class: 'empty' }, 'No detection names agents yet.'));
      return;
    }
    const max = Math.max(1, ...matrix.counts.flat());
    const level = (count) => count === 0 ? 0 : Math.min(5, 1 + Math.floor((4 * (count - 1)) / Math.max(1, max - 1)));
    const head = h('tr', null, [h('th', null, '')].concat(matrix.agents.map((agent) => h('th', { scope: 'col', title: agent }, h('span', null, agent)))));
    const rows = matrix.agents.map((agent, i) => h('tr', { 'data-agent': agent },
      [h('th', { scope: 'row', title: agent }, agent)].concat(matrix.counts[i].map((count, j) => h('td', {
        class: 'heat-' + level(count) + (i === j ? ' diag' : ''),
        'data-a': agent,
        'data-b': matrix.agents[j],
        'data-count': count,
        title: i === j
          ? count + ' detections name ' + agent
          : count + ' detections name both ' + agent + ' and ' + matrix.agents[j],
      }, String(count))))));
    replace(wrap, h('table', { class: 'matrix' }, [h('thead', null, head), h('tbody', null, rows)]));
  }

  function detectionItem(detection, colors, withTask) {
    const swatch = h('span', { class: 'swatch' });
    const color = colors && colors.get(detection.kind);
    if (color) swatch.style.background = color;
    const meta = [
      h('span', null, ['evidence lines ', h('span', { class: 'lines' }, lineList(detection.evidence))]),
    ];
    if (detection.evidence_ids && detection.evidence_ids.length) {
      meta.push(h('span', null, ['ids ', h('span', { class: 'lines' }, lineList(detection.evidence_ids))]));
    }
    if (detection.agents && detection.agents.length) {
      meta.push(h('span', null, detection.agents.map((agent) => h('span', { class: 'agent' }, agent))));
    }
    if (detection.skip_agent) meta.push(h('span', null, 'skip ' + detection.skip_agent));
    if (detection.loop_count) meta.push(h('span', null, 'loop ' + detection.loop_count));
    return h('li', {
      class: 'detection',
      'data-task': detection.task,
      'data-kind': detection.kind,
      'data-line': detection.line,
    }, [
      h('div', { class: 'head' }, [
        severityBadge(detection.severity),
        h('span', { class: 'kind' }, [color ? swatch : null, detection.kind]),
        actionChip(detection.action),
        withTask ? h('a', { class: 'task-link', href: taskHref(detection.task) }, detection.task) : null,
        h('span', { class: 'line-ref' }, 'line ' + detection.line),
        detection.at ? when(detection.at) : null,
      ]),
      h('p', { class: 'reason' }, detection.reason),
      h('div', { class: 'meta' }, meta),
      detection.directive ? h('p', { class: 'directive' }, 'Directive: ' + detection.directive) : null,
    ]);
  }

  // The spend cards and the costliest loops, shown once a listed task's events carried usage.
  function renderSpend(data) {
    const spend = data.spend;
    const shown = Boolean(spend && spend.tasks > 0);
    byId('spend-cards').hidden = !shown;
    byId('costliest-panel').hidden = !shown;
    if (!shown) return;
    const total = spend.total;
    const loops = spend.in_loops;
    replace(byId('spend-cards'), [
      spendCard('Tokens', 'tokens', tokenCount(total), tokenCount(total).toLocaleString('en-US'),
        'in ' + total.input_tokens.toLocaleString('en-US') + ' · out ' + total.output_tokens.toLocaleString('en-US')),
      spendCard('Cost', 'cost', total.cost_usd, dollars(total.cost_usd), plural(spend.tasks, 'task', 'tasks') + ' with usage'),
      spendCard('Tokens in loops', 'loop-tokens', tokenCount(loops), tokenCount(loops).toLocaleString('en-US'),
        share(tokenCount(loops), tokenCount(total)), tokenCount(loops) ? 'warn' : ''),
      spendCard('Cost in loops', 'loop-cost', loops.cost_usd, dollars(loops.cost_usd),
        share(loops.cost_usd, total.cost_usd), loops.cost_usd ? 'bad' : ''),
    ]);
    const rows = spend.costliest_loops.map((loop) => {
      const row = h('tr', {
        class: 'loop-row',
        'data-task': loop.task,
        'data-loop-kind': loop.kind,
        'data-evidence': loop.evidence.join(','),
        'data-tokens': tokenCount(loop),
        'data-cost': loop.cost_usd === undefined ? '' : loop.cost_usd,
      }, [
        h('td', null, h('a', { class: 'task-link', href: taskHref(loop.task) }, loop.task)),
        h('td', null, h('span', { class: 'kind' }, loop.kind)),
        h('td', { class: 'lines' }, lineList(loop.evidence)),
        h('td', { class: 'num' }, tokenCount(loop).toLocaleString('en-US')),
        h('td', { class: 'num' }, dollars(loop.cost_usd)),
      ]);
      row.addEventListener('click', (event) => {
        if (event.target.closest('a')) return;
        window.location.href = taskHref(loop.task);
      });
      return row;
    });
    replace(byId('costliest').tBodies[0], rows);
    byId('costliest-empty').hidden = rows.length > 0;
  }

  let showAll = false;
  function renderDetections(data, colors) {
    const list = data.recent_detections;
    const shown = showAll ? list : list.slice(0, SHOWN_DETECTIONS);
    replace(byId('detections'), shown.map((detection) => detectionItem(detection, colors, true)));
    byId('detections-empty').hidden = list.length > 0;
    const more = byId('detections-more');
    more.hidden = list.length <= SHOWN_DETECTIONS;
    more.textContent = showAll ? 'Show the newest ' + SHOWN_DETECTIONS : 'Show all ' + list.length;
    byId('detections-hint').textContent = data.totals.detections > list.length
      ? 'The newest ' + list.length + ' of ' + data.totals.detections + ', with the reason and the input lines that show the loop.'
      : 'Newest first, with the reason and the input lines that show the loop.';
  }

  async function overview() {
    let latest = null;
    async function refresh() {
      const data = await api('/v1/dashboard');
      latest = data;
      const colors = kindColors(data.timeline.series);
      renderTotals(data);
      renderSpend(data);
      renderTasks(data);
      renderChart(data, colors);
      renderMatrix(data);
      renderDetections(data, colors);
      byId('generated').textContent = 'Updated ' + formatTime(data.generated_at);
      document.body.dataset.loaded = 'true';
      document.body.dataset.tasks = data.tasks.length;
    }
    byId('detections-more').addEventListener('click', () => {
      showAll = !showAll;
      if (latest) renderDetections(latest, kindColors(latest.timeline.series));
    });
    await guarded(refresh);
    const later = throttled(refresh);
    follow(later, later);
    // Relative times ("3 min ago") age even without new decisions.
    setInterval(later, 60000);
  }

  // ---- the task page -----------------------------------------------------

  function taskFromPath() {
    const prefix = '/tasks/';
    const path = window.location.pathname;
    return path.startsWith(prefix) ? decodeURIComponent(path.slice(prefix.length)) : '';
  }

  function renderTask(report) {
    const section = byId('task');
    section.dataset.task = report.task;
    section.dataset.status = report.status;
    section.dataset.loopCount = report.loop_count;
    section.dataset.pivots = report.pivots;
    section.dataset.detections = report.detections.length;
    section.dataset.episodes = report.cycle_log.length;
    byId('task-id').textContent = report.task;
    replace(byId('task-status'), statusBadge(report.status));
    const open = report.cycle_log.filter((episode) => !episode.resolution).length;
    const cards = [
      ['Status', report.status.replace('_', ' '), { active: 'ok', escalated: 'warn', paused: 'warn', aborted_stuck: 'bad' }[report.status] || '', null],
      ['Loop count', report.loop_count, report.loop_count ? 'warn' : '', null],
      ['Pivots', report.pivots, '', null],
      ['Detections', report.detections.length, '', null],
      ['Episodes', report.cycle_log.length, '', report.cycle_log.length ? (open ? open + ' open' : 'all resolved') : null],
    ];
    replace(byId('task-cards'), cards.map(([label, value, tone, note]) => h('div', { class: 'card ' + tone }, [
      h('div', { class: 'label' }, label),
      h('div', { class: 'value' }, String(value)),
      note ? h('div', { class: 'note' }, note) : null,
    ])).concat(taskSpendCards(report.usage)));
  }

  // The task's spend cards, when its events carried usage.
  function taskSpendCards(usage) {
    if (!usage) return [];
    const loops = usage.in_loops;
    return [
      spendCard('Tokens', 'tokens', tokenCount(usage), tokenCount(usage).toLocaleString('en-US'),
        'in ' + usage.input_tokens.toLocaleString('en-US') + ' · out ' + usage.output_tokens.toLocaleString('en-US')),
      spendCard('Cost', 'cost', usage.cost_usd, dollars(usage.cost_usd), null),
      spendCard('Cost in loops', 'loop-cost', loops.cost_usd, dollars(loops.cost_usd),
        share(loops.cost_usd, usage.cost_usd), loops.cost_usd ? 'bad' : ''),
    ];
  }

  // The spend chart's frame: plot area and scales over the kept events' lines.
  function spendFrame(events, valueOf) {
    const frame = { width: 1120, height: 300, left: 60, right: 14, top: 12, bottom: 26 };
    frame.plotW = frame.width - frame.left - frame.right;
    frame.plotH = frame.height - frame.top - frame.bottom;
    frame.first = events[0].line;
    frame.last = events[events.length - 1].line;
    frame.max = niceCeil(Math.max(...events.map((event) => valueOf(event.cumulative))));
    const span = Math.max(1, frame.last - frame.first);
    frame.x = (line) => frame.left + (frame.plotW * (line - frame.first)) / span;
    frame.y = (value) => frame.top + frame.plotH - (frame.plotH * value) / frame.max;
    return frame;
  }

  // The lines an episode covers: its detections' lines and their evidence
  // (a budget detection's evidence is other loops', so it is left out).
  function episodeLines(episode, detections) {
    const lines = episode.lines.slice();
    for (const detection of detections) {
      if (detection.kind !== 'budget' && episode.lines.includes(detection.line)) lines.push(...detection.evidence);
    }
    return lines;
  }

  // Shaded bands over the lines of each loop episode that falls in the chart.
  function episodeBands(svg, frame, report) {
    for (const episode of report.cycle_log) {
      if (!episode.lines || !episode.lines.length) continue;
      const lines = episodeLines(episode, report.detections);
      const from = Math.max(frame.first, Math.min(...lines));
      const to = Math.min(frame.last, Math.max(...lines));
      if (from > to) continue;
      const x0 = frame.x(from) - 5;
      svg.appendChild(s('rect', {
        class: 'episode-band', x: x0, y: frame.top, width: Math.max(10, frame.x(to) + 5 - x0), height: frame.plotH,
        'data-episode': episode.id, 'data-from': from, 'data-to': to,
      }, s('title', null, 'Loop episode: lines ' + lineList(episode.lines) + ' (' + episode.patterns.join(', ') + ')')));
    }
  }

  // The axes: four value ticks, and line numbers along the bottom.
  function spendAxes(svg, frame, format) {
    for (let i = 0; i <= 4; i++) {
      const value = (frame.max * i) / 4;
      const y = frame.y(value);
      svg.appendChild(s('line', { class: i === 0 ? 'axis' : 'grid', x1: frame.left, x2: frame.width - frame.right, y1: y, y2: y }));
      svg.appendChild(s('text', { x: frame.left - 6, y: y + 4, 'text-anchor': 'end' }, format(value)));
    }
    const step = Math.max(1, Math.ceil((frame.last - frame.first) / 8));
    for (let line = frame.first; line <= frame.last; line += step) {
      svg.appendChild(s('text', { x: frame.x(line), y: frame.height - 8, 'text-anchor': 'middle' }, 'line ' + line));
    }
  }

  // Spend over time: the running total after each of the task's last events
  // with usage (dollars when priced, else tokens), loop events and episodes marked.
  function renderTaskSpend(report) {
    const spend = report.spend;
    const panel = byId('spend-panel');
    panel.hidden = !spend || spend.events.length === 0;
    if (panel.hidden) return;
    const events = spend.events;
    const byCost = report.usage && report.usage.cost_usd !== undefined && report.usage.cost_usd !== null;
    const valueOf = byCost ? (totals) => totals.cost_usd || 0 : tokenCount;
    const format = byCost ? dollars : (value) => Math.round(value).toLocaleString('en-US');
    const frame = spendFrame(events, valueOf);
    const last = valueOf(events[events.length - 1].cumulative);
    const svg = s('svg', {
      viewBox: '0 0 ' + frame.width + ' ' + frame.height, role: 'img', 'aria-label': 'Spend over the task\'s events',
      'data-metric': byCost ? 'cost_usd' : 'tokens', 'data-points': events.length, 'data-last': last,
    });
    episodeBands(svg, frame, report);
    spendAxes(svg, frame, format);
    const path = events.map((event, at) => (at ? 'L' : 'M') + frame.x(event.line).toFixed(1) + ',' + frame.y(valueOf(event.cumulative)).toFixed(1));
    svg.appendChild(s('path', { class: 'spend-line', d: path.join(' ') }));
    for (const event of events) {
      svg.appendChild(s('circle', {
        class: 'spend-point' + (event.in_loops ? ' in-loop' : ''), cx: frame.x(event.line), cy: frame.y(valueOf(event.cumulative)),
        r: event.in_loops ? 4.5 : 3, 'data-line': event.line, 'data-cumulative': valueOf(event.cumulative), 'data-in-loops': event.in_loops,
      }, s('title', null, 'line ' + event.line + ': ' + format(valueOf(event)) + ', ' + format(valueOf(event.cumulative)) + ' in all' + (event.in_loops ? ' (in a loop)' : ''))));
    }
    replace(byId('spend-chart'), svg);
    byId('spend-hint').textContent = 'Running total of ' + (byCost ? 'dollars' : 'tokens') + ' after each of the task\'s last ' +
      plural(events.length, 'event', 'events') + ' with usage (lines ' + frame.first + '–' + frame.last + '), ' + format(last) + ' in all.';
    replace(byId('task-loops'), spend.costliest_loops.map((loop) => h('li', { class: 'task-loop', 'data-loop-kind': loop.kind, 'data-cost': loop.cost_usd === undefined ? '' : loop.cost_usd }, [
      h('span', { class: 'kind' }, loop.kind),
      h('span', { class: 'lines' }, 'lines ' + lineList(loop.evidence)),
      h('span', null, tokenCount(loop).toLocaleString('en-US') + ' tokens'),
      h('span', { class: 'cost' }, dollars(loop.cost_usd)),
    ])));
  }

  function resetItem(entry) {
    const reset = entry.record;
    const by = reset.reason === 'human' ? 'a human event' : reset.reason === 'completed' ? 'completion' : reset.reason;
    return h('li', { class: 'detection reset', 'data-line': entry.line, 'data-reset': reset.reason }, [
      h('div', { class: 'head' }, [
        h('span', { class: 'badge status-completed' }, 'reset'),
        h('span', { class: 'line-ref' }, 'line ' + entry.line),
        when(entry.at),
      ]),
      h('p', { class: 'reason' }, 'Counters reset by ' + by + ': loop count ' + reset.previous_loop_count + ' → 0, pivots ' +
        reset.previous_pivots + ' → 0, status ' + String(reset.previous_status).replace('_', ' ') + ' → active'),
    ]);
  }

  function renderTimeline(task, timeline, liveDecisions) {
    const items = [];
    const known = new Set(timeline.entries.map((entry) => entry.line));
    for (const decision of liveDecisions) {
      if (known.has(decision.line)) continue;
      items.push(h('li', { class: 'detection live-decision', 'data-line': decision.line }, [
        h('div', { class: 'head' }, [
          actionChip(decision.action),
          statusBadge(decision.status),
          h('span', { class: 'line-ref' }, 'line ' + decision.line),
          h('span', { class: 'when' }, 'live · ' + decision.received.toLocaleTimeString()),
        ]),
        h('p', { class: 'reason' }, 'Decision: loop count ' + decision.loop_count + ', ' + plural(decision.pivots, 'pivot', 'pivots') +
          (decision.detections.length ? ', ' + plural(decision.detections.length, 'detection', 'detections') : ', no detection')),
      ]));
    }
    for (const entry of timeline.entries) {
      if (entry.record.entry === 'detection') {
        const item = detectionItem({ ...entry.record, task: task, line: entry.line, at: entry.at }, null, false);
        item.classList.add('sev-line-' + entry.record.severity);
        items.push(item);
      } else if (entry.record.entry === 'reset') {
        items.push(resetItem(entry));
      }
    }
    replace(byId('timeline'), items);
    byId('timeline-empty').hidden = items.length > 0;
    byId('timeline-hint').textContent = timeline.total > timeline.entries.length
      ? 'The newest ' + timeline.entries.length + ' of ' + timeline.total + ' entries of the audit log; decisions answered while this page is open are added live.'
      : 'Detections and counter resets, newest first; decisions answered while this page is open are added live.';
  }

  function renderEpisodes(report) {
    const episodes = report.cycle_log.map((episode, at) => ({ ...episode, number: at + 1 })).reverse();
    replace(byId('episodes'), episodes.map((episode) => h('li', { class: 'episode', 'data-episode': episode.id }, [
      h('div', { class: 'head' }, [
        h('span', { class: 'id', title: 'episode id ' + episode.id }, 'Episode ' + episode.number),
        actionChip(episode.intervention),
        episode.escalated ? h('span', { class: 'badge status-escalated' }, 'gated') : null,
        episode.resolution
          ? h('span', { class: 'resolution' }, 'resolved: ' + episode.resolution)
          : h('span', { class: 'resolution open' }, 'open'),
      ]),
      h('div', { class: 'patterns' }, episode.patterns.map((kind) => h('span', { class: 'kind' }, kind))),
      h('div', { class: 'meta' }, [
        'opened ', h('time', { datetime: episode.opened_at }, formatTime(episode.opened_at)),
        episode.resolved_at ? [' · resolved ', h('time', { datetime: episode.resolved_at }, formatTime(episode.resolved_at))] : null,
        ' · lines ', h('span', { class: 'lines' }, lineList(episode.lines)),
      ].flat()),
    ])));
    byId('episodes-empty').hidden = episodes.length > 0;
  }

  async function taskPage() {
    const task = taskFromPath();
    document.title = 'loopguard · ' + task;
    byId('task-id').textContent = task;
    const liveDecisions = [];
    let timeline = null;
    async function refresh() {
      const path = '/v1/tasks/' + encodeURIComponent(task);
      const [report, entries] = await Promise.all([api(path), api(path + '/timeline')]);
      timeline = entries;
      renderTask(report);
      renderTaskSpend(report);
      renderTimeline(task, timeline, liveDecisions);
      renderEpisodes(report);
      byId('generated').textContent = 'Updated ' + formatTime(new Date().toISOString());
      document.body.dataset.loaded = 'true';
    }
    await guarded(refresh);
    const later = throttled(refresh);
    follow((decision) => {
      if (decision.task !== task) return;
      decision.received = new Date();
      liveDecisions.unshift(decision);
      liveDecisions.length = Math.min(liveDecisions.length, 50);
      if (timeline) renderTimeline(task, timeline, liveDecisions);
      later();
    }, later);
  }

  // ---- start -------------------------------------------------------------

  takeTokenFromFragment();
  if (document.body.dataset.page === 'task') taskPage(); else overview();
})();
