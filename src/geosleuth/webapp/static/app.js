/* geosleuth web app: hash-routed pages over the JSON API.
   Every piece of model or tool output is inserted as a text node (never innerHTML). */
"use strict";

var state = { config: null, source: null, form: { useModel: null, style: null, samples: "1" } };

function el(tag, attrs) {
  var node = document.createElement(tag);
  var props = attrs || {};
  Object.keys(props).forEach(function (key) {
    var value = props[key];
    if (value === null || value === undefined || value === false) return;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "style") node.style.cssText = value;  /* CSSOM: allowed by the page's CSP, unlike style="" */
    else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  });
  for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
  return node;
}

function append(node, child) {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
  node.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function api(path, options) {
  return fetch(path, options).then(function (response) {
    return response.json().catch(function () { return {}; }).then(function (body) {
      if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
      return body;
    });
  });
}

function fmt(value, digits) {
  if (value === null || value === undefined || (typeof value === "number" && !isFinite(value))) return "–";
  return typeof value === "number" ? value.toFixed(digits === undefined ? 2 : digits) : String(value);
}

function statusPill(status) {
  var cls = status === "ok" || status === "done" ? "ok"
    : (status === "running" || status === "queued" ? "info" : (status === "no_evidence" || status === "parse_failed" || status === "cancelled" ? "warn" : "bad"));
  return el("span", { class: "pill " + cls, text: String(status).replace(/_/g, " ") });
}

/* A job in Recent: a finished job without an answer says so, in the colour of a warning. */
function jobPill(job) {
  if (job.status === "done" && job.outcome && job.outcome !== "ok")
    return el("span", { class: "pill warn", title: job.outcome.replace(/_/g, " "), text: "no answer" });
  return statusPill(job.status);
}


/* ---------- maps (Leaflet over the server's offline tiles) ---------- */

var COLOURS = { pred: "#1f6feb", truth: "#1a7f37", error: "#b42318", sample: "#8250df", cand: "#bf8700", pin: "#cf222e" };

/* Great-circle distance in km (haversine, mean Earth radius 6371.0088 km, as the server's). */
function haversineKm(lat1, lon1, lat2, lon2) {
  var r = Math.PI / 180, dlat = (lat2 - lat1) * r, dlon = (lon2 - lon1) * r;
  var a = Math.sin(dlat / 2) * Math.sin(dlat / 2) + Math.cos(lat1 * r) * Math.cos(lat2 * r) * Math.sin(dlon / 2) * Math.sin(dlon / 2);
  return 2 * 6371.0088 * Math.asin(Math.min(1, Math.sqrt(a)));
}

/* An interactive map in `node`: points {lat, lon, kind: "pred"|"truth", label}, circles {lat, lon,
   radius_km}, lines [[lat, lon], [lat, lon]]. Returns null (and leaves `node` empty) without Leaflet. */
function drawMap(node, layers) {
  if (!window.L) return null;
  /* SVG for a few shapes (each one an element a test or a screen reader can find), canvas for many */
  var many = (layers.points || []).length > 200;
  var map = L.map(node, { worldCopyJump: true, preferCanvas: many, maxZoom: state.config.map_max_zoom || 12 });
  map.attributionControl.setPrefix(false);
  map.setView([20, 0], 1);  /* a view first: vector layers are projected when added */
  L.tileLayer("/api/tiles/{z}/{x}/{y}.png", { maxZoom: state.config.map_max_zoom || 12, attribution: "offline: Natural Earth borders, GeoNames places" }).addTo(map);
  var bounds = [];
  (layers.lines || []).forEach(function (pair) {
    L.polyline(pair, { color: COLOURS.error, weight: 1.5, opacity: 0.8, className: "error-line" }).addTo(map);
  });
  (layers.circles || []).forEach(function (c) {
    var circle = L.circle([c.lat, c.lon], { radius: c.radius_km * 1000, color: COLOURS.pred, weight: 1, fillOpacity: 0.12, className: "uncertainty" }).addTo(map);
    circle.bindTooltip(el("span", { text: "uncertainty ± " + fmt(c.radius_km, c.radius_km < 10 ? 1 : 0) + " km" }));
    if (c.radius_km < 3000) { var b = L.latLng(c.lat, c.lon).toBounds(c.radius_km * 2000); bounds.push(b.getSouthWest(), b.getNorthEast()); }
  });
  (layers.points || []).forEach(function (p) {
    /* a big marker is a ring: the place label the tile draws under it stays readable */
    var marker = L.circleMarker([p.lat, p.lon], p.small ? { radius: 4, color: "#fff", weight: 1, fillColor: COLOURS[p.kind], fillOpacity: 1, className: "point-" + p.kind }
      : { radius: 8, color: COLOURS[p.kind], weight: 3, fillColor: COLOURS[p.kind], fillOpacity: 0.15, className: "point-" + p.kind }).addTo(map);
    if (p.label) marker.bindTooltip(el("span", { text: p.label }));  /* a node: a string would be innerHTML */
    bounds.push(L.latLng(p.lat, p.lon));
  });
  if (bounds.length > 1) map.fitBounds(L.latLngBounds(bounds), { padding: [24, 24], maxZoom: 10 });
  else if (bounds.length) map.setView(bounds[0], 8);
  return map;
}

function mapLegend(items) {
  return el("div", { class: "map-legend muted small" }, items.map(function (item) {
    return el("span", {}, el("span", { class: "swatch " + item[0] }), item[1]);
  }));
}

/* A map card whose Leaflet map is created once the node is in the page (Leaflet measures it);
   `onMap(map)` then adds what the caller needs (the pin). */
function mapCard(id, layers, legend, extra, onMap) {
  var node = el("div", { class: "map", id: id });
  var wrap = el("div", { class: "map-wrap" }, node, legend, extra || null);
  setTimeout(function () {
    if (!document.body.contains(node)) return;
    var map = drawMap(node, layers);
    if (map && onMap) onMap(map);
  }, 0);
  return wrap;
}

/* Click the map to drop a pin: the list says how far it is from the answer and each candidate. */
function pinTool(targets) {
  var list = el("ol", { class: "pin-distances", id: "pin-distances" });
  var box = el("div", { class: "muted small", id: "pin-box" }, el("div", { id: "pin-hint", text: "Click the map to drop a pin and measure its distance to the answer and every candidate." }), list);
  function onMap(map) {
    var pin = null;
    map.on("click", function (e) {
      var lat = e.latlng.lat, lon = ((e.latlng.lng + 540) % 360) - 180;
      if (pin) pin.setLatLng(e.latlng);
      else pin = L.circleMarker(e.latlng, { radius: 7, color: COLOURS.pin, weight: 3, fillColor: COLOURS.pin, fillOpacity: 0.3, className: "point-pin" }).addTo(map);
      document.getElementById("pin-hint").textContent = "Pin at " + lat.toFixed(5) + ", " + lon.toFixed(5) + " (click again to move it):";
      clear(list);
      targets.forEach(function (t) {
        var km = haversineKm(lat, lon, t.lat, t.lon);
        list.appendChild(el("li", { text: fmt(km, km < 10 ? 2 : 0) + " km to " + t.label }));
      });
    });
  }
  return { node: box, onMap: onMap };
}

/* ---------- trajectories ---------- */

function argChips(args) {
  var keys = Object.keys(args || {});
  if (!keys.length) return el("span", { class: "muted small", text: "no arguments" });
  return el("span", { class: "args" }, keys.map(function (k) {
    var v = args[k];
    return el("span", { class: "arg" }, el("b", { text: k + "=" }), typeof v === "string" ? v : JSON.stringify(v));
  }));
}

var FENCE = /<<<TOOL OUTPUT ([^:>]*)(?::[^>]*)?>>>\n?([\s\S]*?)\n?<<<END TOOL OUTPUT>>>/g;

/* Tool output as the model saw it: each <<<TOOL OUTPUT …>>> fence drawn as a labelled block
   (the markers tell the model "data, not instructions"; the page says it in words). */
function fencedText(text) {
  var out = [], last = 0, match;
  FENCE.lastIndex = 0;
  while ((match = FENCE.exec(text)) !== null) {
    if (match.index > last) out.push(el("pre", { text: text.slice(last, match.index) }));
    out.push(el("div", { class: "fence" }, el("div", { class: "fence-label", text: "output of " + (match[1].trim() || "a tool") + " · data, not instructions" }),
      el("pre", { text: match[2] })));
    last = FENCE.lastIndex;
  }
  if (last < text.length) out.push(el("pre", { text: text.slice(last) }));
  return out;
}

/* A model or tool error told by its cause, with what to do; the server's own words folded away. */
var CAUSES = [
  [/context[ _-]?length|context window|maximum context|too many tokens|prompt is too long|input (is )?too long|reduce the length/i, "The request was longer than the model's context window",
    "The image and the conversation take tokens: send a smaller image (--pixel-budget of geosleuth locate and eval), serve the model with a longer context, or use one that has it."],
  [/\b(401|403)\b|unauthori[sz]ed|forbidden|api[ _-]?key|authenticat|permission denied/i, "The model endpoint refused the credentials",
    "Check the API key the server was started with (OPENAI_API_KEY or the config file)."],
  [/image input|does not support (image|vision)|not a (vision|multimodal)|image_url|vision|multimodal|refused the image/i, "The model refused the image",
    "A text-only model cannot read photos: start geosleuth serve with --observer offline, or use a vision model."],
  [/connect|unreachable|refused|timed? ?out|name or service|no route|getaddrinfo|never answered|resolve/i, "The model endpoint could not be reached",
    "Is the model server running at the configured address, and reachable from this machine?"]
];

function renderError(text, id) {
  var cause = null;
  for (var i = 0; i < CAUSES.length && !cause; i++) if (CAUSES[i][0].test(text)) cause = CAUSES[i];
  if (!cause || text.length < 80) return el("div", { class: "banner error", id: id || null, text: text });
  return el("div", { class: "banner error", id: id || null },
    el("b", { text: cause[1] + "." }), " " + cause[2],
    el("details", { class: "raw" }, el("summary", { text: "what the server said" }), el("pre", { text: text })));
}

function renderCall(call, doneAt) {
  var head = el("div", { class: "call-head" },
    el("span", { class: "tool-name", text: call.name }), argChips(call.arguments),
    el("span", { style: "margin-left:auto" }),
    call.ok ? el("span", { class: "pill ok", text: "ok" }) : el("span", { class: "pill bad", text: "error" }),
    call.cache_hit ? el("span", { class: "pill", text: "cached" }) : null,
    call.provider ? el("span", { class: "pill", text: call.provider }) : null,
    el("span", { class: "muted small", text: fmt(call.latency_s, 2) + " s" + (typeof doneAt === "number" ? " · done at " + fmt(doneAt, 1) + " s" : "") }));
  var body = el("div", { class: "call-body" },
    call.error ? el("div", { class: "call-error", text: call.error }) : null,
    call.result_text ? fencedText(call.result_text) : (call.error ? null : el("span", { class: "muted small", text: "(no text output)" })),
    call.images && call.images.length ? el("div", { class: "thumbs" }, call.images.map(function (src) {
      return el("a", { href: src, target: "_blank" }, el("img", { src: src, alt: call.name + " result", loading: "lazy" }));
    })) : null);
  return el("div", { class: "call" + (call.ok ? "" : " failed") }, head, body);
}

/* A turn; `steps`: the offline pipeline's one turn, whose calls are its steps, each with the
   time into the pipeline at which it finished. */
function renderTurn(turn, steps) {
  var usage = turn.usage || {};
  var tokens = (usage.prompt_tokens || 0) + (usage.completion_tokens || 0);
  var at = 0;
  return el("div", { class: "turn", "data-turn": turn.index },
    el("div", { class: "turn-head" },
      el("h3", { text: steps ? "Pipeline steps" : "Turn " + (turn.index + 1) }),
      el("span", { class: "muted", text: fmt(turn.latency_s, 1) + " s" + (tokens ? " · " + tokens + " tokens" : "") }),
      turn.note ? el("span", { class: "note", text: turn.note }) : null),
    turn.reasoning ? el("details", { class: "reasoning" }, el("summary", { text: "reasoning" }), el("div", { class: "text", text: turn.reasoning })) : null,
    turn.text ? el("div", { class: "text", text: turn.text }) : null,
    (turn.tool_calls || []).map(function (call) { at += call.latency_s || 0; return renderCall(call, steps ? at : undefined); }));
}

function renderTurns(trajectory) {
  var box = el("div", { class: "timeline" });
  if (!trajectory.turns.length) box.appendChild(el("p", { class: "muted", text: "No turns were recorded." }));
  var steps = trajectory.prompt_style === "offline";
  trajectory.turns.forEach(function (t) { box.appendChild(renderTurn(t, steps)); });
  return box;
}

function placeLine(p) {
  var parts = [p.poi, p.street, p.town, p.city, p.admin2, p.admin1, p.country || p.country_code].filter(Boolean);
  var seen = {};
  parts = parts.filter(function (x) { var k = String(x).toLowerCase(); if (seen[k]) return false; seen[k] = 1; return true; });
  return parts.join(", ");
}

/* Links that save the answer: the trajectory record (JSON), its points (GeoJSON; for a job also
   KML and CSV, with the provenance) and a job's one-page report. */
function downloadLinks(downloads) {
  if (!downloads) return null;
  var names = [["json", "JSON record"], ["geojson", "GeoJSON"], ["kml", "KML"], ["csv", "CSV"]];
  return el("div", { class: "row downloads" }, el("span", { class: "muted small", text: "Download" }),
    names.filter(function (n) { return downloads[n[0]]; }).map(function (n) {
      return el("a", { class: "button small", id: "download-" + n[0], href: downloads[n[0]], download: "", text: n[1] });
    }),
    downloads.html ? el("a", { class: "button small", id: "download-html", href: downloads.html, target: "_blank", rel: "noopener", text: "Report (printable)" }) : null);
}

function renderAnswer(trajectory, mapUrl, errorKm, truth, downloads) {
  var p = trajectory.prediction;
  var failed = trajectory.status !== "ok" || !p;
  var left = el("div");
  if (p && (p.lat !== null || p.country || p.city)) {
    left.appendChild(el("div", { class: "muted small", text: "Answer" }));
    left.appendChild(el("div", { class: "place" }, placeLine(p) || "coordinates only",
      p.country_code ? el("span", { class: "code", style: "margin-left:.5rem", text: p.country_code }) : null));
    if (p.lat !== null && p.lon !== null) {
      var coords = p.lat.toFixed(5) + ", " + p.lon.toFixed(5);
      left.appendChild(el("div", { class: "row" },
        el("span", { class: "coords", id: "answer-coords", text: coords }),
        el("button", { class: "small", onclick: function (e) { copy(coords, e.target); } }, "Copy"),
        el("a", { class: "small", href: "https://www.openstreetmap.org/?mlat=" + p.lat + "&mlon=" + p.lon + "#map=13/" + p.lat + "/" + p.lon,
          target: "_blank", rel: "noopener noreferrer", text: "open in OpenStreetMap ↗" })));
    }
    var conf = p.confidence;
    left.appendChild(el("dl", { class: "kv" },
      conf !== null && conf !== undefined ? [el("dt", { text: "confidence" }), el("dd", {},
        el("span", { class: "meter" }, el("span", { style: "width:" + Math.round(Math.max(0, Math.min(1, conf)) * 100) + "%" })),
        Math.round(conf * 100) + " %")] : null,
      p.radius_km ? [el("dt", { text: "uncertainty" }), el("dd", { text: "± " + fmt(p.radius_km, p.radius_km < 10 ? 1 : 0) + " km" })] : null,
      p.address ? [el("dt", { text: "address" }), el("dd", { text: p.address })] : null,
      p.coords_source ? [el("dt", { text: "coordinates from" }), el("dd", { text: p.coords_source })] : null,
      typeof errorKm === "number" ? [el("dt", { text: "error vs truth" }), el("dd", {}, el("b", { text: fmt(errorKm, errorKm < 10 ? 2 : 0) + " km" }))] : null,
      trajectory.aggregator ? [el("dt", { text: "aggregated by" }), el("dd", { text: trajectory.aggregator })] : null,
      [el("dt", { text: "answered by" }), el("dd", { text: trajectory.model + (trajectory.prompt_style ? " · " + trajectory.prompt_style : "") })],
      [el("dt", { text: "work" }), el("dd", { text: workLine(trajectory) +
        (trajectory.duration_s !== null ? ", " + fmt(trajectory.duration_s, 1) + " s" : "") })]));
    if (p.evidence && p.evidence.length) {
      left.appendChild(el("div", { class: "muted small", text: "Evidence" }));
      left.appendChild(el("ul", { class: "evidence" }, p.evidence.map(function (e) { return el("li", { text: e }); })));
    }
  } else {
    left.appendChild(el("div", { class: "place", text: "Could not locate this image" }));
  }
  if (trajectory.error) left.appendChild(renderError(trajectory.error));
  append(left, downloadLinks(downloads));
  if ((trajectory.conflicts || []).length) {
    left.appendChild(el("div", { class: "muted small", text: "Clues that disagree" }));
    left.appendChild(el("ul", { class: "conflicts", id: "conflicts" }, trajectory.conflicts.map(function (c) { return el("li", { text: c }); })));
  }
  var cands = trajectory.candidates || [];
  if (cands.length > 1) {
    left.appendChild(el("div", { class: "muted small", text: "Ranked candidates (" + cands.length + ")" }));
    left.appendChild(el("ol", { class: "cand-list", id: "candidates" }, cands.map(function (c) {
      return el("li", {}, el("b", { text: c.label }), " · score " + fmt(c.score, 2) + " · ± " + fmt(c.radius_km, c.radius_km < 10 ? 1 : 0) + " km" +
        (c.verdict ? " · " + c.verdict : "") + ((c.evidence || []).length ? " · evidence: " + c.evidence.join("; ") : ""));
    })));
  }
  var right = answerMap(p, truth, mapUrl, trajectory.samples, cands);
  return el("section", { class: "card answer" + (failed ? " none" : ""), id: "answer", tabindex: "-1" },
    el("div", { class: "row", style: "justify-content:space-between" }, el("h2", { style: "margin:0", text: "Result" }), statusPill(trajectory.status)),
    el("div", { class: "answer-grid" }, left, right));
}

function answerMap(p, truth, mapUrl, samples, cands) {
  var hasPred = p && p.lat !== null && p.lon !== null;
  var hasTruth = truth && truth.lat !== null && truth.lat !== undefined;
  if (!hasPred && !hasTruth) return null;
  if (!window.L) return mapUrl ? el("img", { class: "answer-map", src: mapUrl, alt: "map around the answer" }) : null;
  var layers = { points: [], circles: [], lines: [] };
  var legend = [];
  var located = (samples || []).filter(function (s) { return s.prediction && s.prediction.lat !== null && s.prediction.lon !== null; });
  located.forEach(function (s) {
    var i = samples.indexOf(s);
    layers.points.push({ lat: s.prediction.lat, lon: s.prediction.lon, kind: "sample", small: true,
      label: "sample " + (i + 1) + ": " + (placeLine(s.prediction) || "coordinates") });
  });
  if (located.length) legend.push(["sample", "each sample (" + located.length + ")"]);
  if (hasPred) {
    layers.points.push({ lat: p.lat, lon: p.lon, kind: "pred", label: "answer: " + (placeLine(p) || "coordinates") });
    if (p.radius_km) layers.circles.push({ lat: p.lat, lon: p.lon, radius_km: p.radius_km });
    legend.push(["pred", "answer" + (p.radius_km ? " (circle: ± " + fmt(p.radius_km, p.radius_km < 10 ? 1 : 0) + " km)" : "")]);
  }
  var targets = hasPred ? [{ lat: p.lat, lon: p.lon, label: "the answer (" + (placeLine(p) || "coordinates") + ")" }] : [];
  (cands || []).forEach(function (c, i) {
    var label = "#" + (i + 1) + " " + c.label + " · score " + fmt(c.score, 2) + ((c.evidence || []).length ? " · " + c.evidence.join("; ") : "");
    if (i > 0 || !hasPred) layers.points.push({ lat: c.lat, lon: c.lon, kind: "cand", small: true, label: label });
    targets.push({ lat: c.lat, lon: c.lon, label: "candidate " + label });
  });
  if ((cands || []).length > 1) legend.push(["cand", "other candidates (" + (cands.length - 1) + ")"]);
  if (hasTruth) {
    layers.points.push({ lat: truth.lat, lon: truth.lon, kind: "truth", label: "ground truth" });
    legend.push(["truth", "ground truth"]);
    if (hasPred) { layers.lines.push([[p.lat, p.lon], [truth.lat, truth.lon]]); legend.push(["error", "error"]); }
  }
  if (!targets.length) return mapCard("answer-map", layers, mapLegend(legend));
  legend.push(["pin", "your pin"]);
  var pin = pinTool(targets);
  return mapCard("answer-map", layers, mapLegend(legend), pin.node, pin.onMap);
}

function workLine(trajectory) {
  var runs = trajectory.samples && trajectory.samples.length ? trajectory.samples : [trajectory];
  var turns = 0, calls = 0;
  runs.forEach(function (t) { turns += t.turns.length; calls += t.n_tool_calls; });
  return (runs.length > 1 ? runs.length + " samples, " : "") + turns + " turn(s), " + calls + " tool call(s)";
}

function copy(text, button) {
  var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1200); };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(done, function () {});
}

function renderTrajectory(trajectory, mapUrl, errorKm, truth, downloads) {
  var wrap = el("div", { id: "trajectory" }, renderAnswer(trajectory, mapUrl, errorKm, truth, downloads));
  if (trajectory.samples && trajectory.samples.length) {
    var body = el("div");
    var tabs = el("div", { class: "samples-tabs" });
    trajectory.samples.forEach(function (s, i) {
      var button = el("button", { onclick: function () {
        Array.prototype.forEach.call(tabs.children, function (b) { b.classList.remove("active"); });
        button.classList.add("active"); clear(body).appendChild(sampleBlock(s));
      } }, "Sample " + (i + 1) + " ", statusPill(s.status));
      tabs.appendChild(button);
    });
    wrap.appendChild(el("h2", { text: trajectory.samples.length + " parallel samples" }));
    wrap.appendChild(tabs); wrap.appendChild(body);
    tabs.firstChild.click();
  } else {
    wrap.appendChild(el("h2", { text: "How it got there" }));
    wrap.appendChild(renderTurns(trajectory));
  }
  return wrap;
}

function sampleBlock(s) {
  var p = s.prediction;
  return el("div", {},
    el("p", { class: "muted", text: p && p.lat !== null ? "Answer: " + placeLine(p) + " (" + p.lat.toFixed(4) + ", " + p.lon.toFixed(4) + ")" : "No coordinates" + (s.error ? ": " + s.error : "") }),
    renderTurns(s));
}

/* ---------- Locate page ---------- */

function locatePage(main, jobId) {
  var cfg = state.config;
  var fileInput = el("input", { type: "file", accept: "image/*", id: "file", multiple: true, "aria-label": "Choose photos" });
  var folderInput = el("input", { type: "file", id: "folder", webkitdirectory: true, multiple: true, "aria-label": "Choose a folder of photos" });
  var preview = el("div");
  var chosen = { file: null, files: [] };
  var dropText = el("div", {}, el("b", { text: "Drop a photo here" }), el("div", { class: "hint", text: "click (or Tab here and press Enter or Space) to choose, or paste one (Ctrl+V) · up to " + cfg.max_upload_mb + " MB · JPEG, PNG, WebP, …" }));
  var drop = el("label", { class: "drop", id: "drop" }, fileInput, dropText);
  function chooseMany(files) {
    var images = Array.prototype.filter.call(files, function (f) { return !f.type || /^image\//.test(f.type); });
    if (images.length === 1) { choose(images[0]); return; }
    chosen.file = null; chosen.files = images;
    clear(preview).appendChild(el("p", { class: "muted small", id: "chosen-count", text: images.length + " images chosen: each becomes a job in one new case." }));
    clear(dropText).appendChild(el("b", { text: images.length + " images" }));
  }
  folderInput.addEventListener("change", function () { chooseMany(folderInput.files); });
  function choose(file) {
    chosen.file = file; chosen.files = [];
    clear(preview).appendChild(el("img", { class: "query-img", src: URL.createObjectURL(file), alt: "chosen image",
      onerror: function () { clear(preview).appendChild(el("p", { class: "muted small", text: "(this browser cannot preview the file)" })); } }));
    clear(dropText).appendChild(el("b", { text: file.name }));
  }
  fileInput.addEventListener("change", function () { if (fileInput.files.length) chooseMany(fileInput.files); });
  /* Enter or Space on the focused chooser opens it: a hidden file input answers a key press only
     now and then (Chromium wants its own activation), so the key is turned into a click here */
  fileInput.addEventListener("keydown", function (e) {
    if (e.key === "Enter" || e.key === " ") { e.preventDefault(); fileInput.click(); }
  });
  drop.addEventListener("dragover", function (e) { e.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", function () { drop.classList.remove("over"); });
  drop.addEventListener("drop", function (e) { e.preventDefault(); drop.classList.remove("over"); if (e.dataTransfer.files.length) chooseMany(e.dataTransfer.files); });
  /* a pasted image (a screenshot, an image copied from another page) is chosen like a dropped one */
  document.onpaste = function (e) {
    if (!document.body.contains(drop)) return;
    var items = Array.prototype.slice.call((e.clipboardData || {}).files || []);
    var image = items.filter(function (f) { return /^image\//.test(f.type); })[0];
    if (image) { e.preventDefault(); choose(image.name && image.name !== "image.png" ? image : new File([image], "pasted-image" + (image.type === "image/png" ? ".png" : ""), { type: image.type })); }
  };

  var useModel = el("select", { id: "engine-select" },
    cfg.model ? el("option", { value: "1", text: "Model: " + cfg.model }) : null,
    el("option", { value: "0", text: "Offline clue pipeline (no model)" }));
  var style = el("select", { id: "prompt" }, cfg.prompt_styles.map(function (s) {
    return el("option", { value: s, text: s.replace(/_/g, " "), selected: s === cfg.prompt_style });
  }));
  var samples = el("input", { type: "number", id: "samples", min: 1, max: cfg.max_samples, value: state.form.samples, style: "width:5rem" });
  if (state.form.useModel !== null) useModel.value = state.form.useModel;
  if (state.form.style !== null) style.value = state.form.style;
  function syncModelFields() {
    var on = useModel.value === "1";
    style.disabled = !on; samples.disabled = !on; if (!on) samples.value = 1;
    state.form = { useModel: useModel.value, style: style.value, samples: samples.value };
  }
  [useModel, style, samples].forEach(function (field) { field.addEventListener("change", syncModelFields); });
  syncModelFields();

  var message = el("div");
  var go = el("button", { class: "primary", id: "locate" }, "Locate");
  var example = cfg.example ? el("button", { id: "example", type: "button" }, "Use the example image") : null;
  function submit(useExample) {
    clear(message);
    var form = new FormData();
    if (useExample) form.append("example", "1");
    else if (chosen.file) form.append("image", chosen.file);
    else if (chosen.files.length) chosen.files.forEach(function (f) { form.append("image", f, f.webkitRelativePath || f.name); });
    else { message.appendChild(el("div", { class: "banner error", text: "Choose an image first (or use the example)." })); return; }
    form.append("use_model", useModel.value); form.append("prompt", style.value); form.append("samples", samples.value);
    go.disabled = true; if (example) example.disabled = true;
    api("/api/locate", { method: "POST", body: form }).then(function (job) {
      location.hash = job.jobs && job.jobs.length > 1 ? "#/cases/" + job.case_id : "#/locate/" + job.id;
    }, function (err) {
      message.appendChild(el("div", { class: "banner error", id: "upload-error", text: err.message }));
    }).then(function () { go.disabled = false; if (example) example.disabled = false; });
  }
  go.addEventListener("click", function () { submit(false); });
  if (example) example.addEventListener("click", function () { submit(true); });

  var recent = el("ul", { class: "jobs-list" });
  function loadRecent() { api("/api/jobs").then(function (jobs) {
    clear(recent);
    if (!jobs.length) recent.appendChild(el("li", { class: "muted", text: "Nothing located yet." }));
    jobs.slice(0, 8).forEach(function (j) {
      recent.appendChild(el("li", {}, jobPill(j), el("a", { href: "#/locate/" + j.id, text: j.image_name }),
        el("span", { class: "muted small", text: new Date(j.created_at * 1000).toLocaleTimeString() })));
    });
  }); }
  loadRecent();

  var form = el("section", { class: "card" },
    el("h1", { text: "Where was this photo taken?" }), drop, preview,
    el("div", { class: "row", style: "margin-top:1rem" },
      el("label", { class: "field" }, "Answered by", useModel),
      el("label", { class: "field" }, "Prompt style", style),
      el("label", { class: "field" }, "Samples", samples)),
    el("label", { class: "field small", style: "margin-top:.6rem" }, "…or a whole folder (each image a job in one case)", folderInput),
    el("div", { class: "form-actions" }, go, example), message,
    el("h2", { text: "Recent" }), recent);
  var work = el("section", { id: "job", class: jobId ? "has-job" : null }, jobId ? null : el("div", { class: "card empty" },
    el("p", { text: "Upload a photo or use the example, then watch the agent reason, call tools and answer." })));
  main.appendChild(el("div", { class: "grid2" }, form, work));
  if (jobId) watchJob(jobId, work, loadRecent);
}

/* What the offline pipeline does after each step (the status line says what is really going on). */
var NEXT_STEP = {
  exif_gps: "Reading the text in the image (OCR)…", ocr: "Weighing the clues in the text…",
  clues: "Looking place names and phone areas up in the gazetteer…", gazetteer: "Matching phone area codes…",
  phone_area: "Matching place names…", place_names: "Reading postcodes…", postcodes: "Ranking the candidates…",
  country: "Ranking the candidates…",
  candidates: "Writing the answer…"
};

function narrow() { return window.matchMedia("(max-width: 900px)").matches; }

/* On a phone the job card sits below the form: bring `node` into view when something happens. */
function showOnPhone(node) { if (node && narrow()) node.scrollIntoView({ block: "start" }); }

function watchJob(jobId, work, onEnd) {
  var clock = el("span", { class: "elapsed", id: "job-elapsed" });
  var text = el("span", { id: "job-status-text", text: "Connecting…" });
  var cancel = el("button", { type: "button", class: "small", id: "cancel-job", onclick: function () {
    cancel.disabled = true;
    api("/api/jobs/" + jobId + "/cancel", { method: "POST" }).catch(function (err) { setStatus(err.message, false); });
  } }, "Cancel");
  var status = el("div", { class: "status-line", id: "job-status", role: "status" }, el("span", { class: "spinner" }), text, clock, cancel);
  var live = el("div", { class: "timeline", id: "live" });
  var samples = {};
  var mode = null;
  var head = el("div", { class: "card job-head" });
  work.appendChild(head); work.appendChild(status); work.appendChild(live);
  showOnPhone(work);
  /* the clock: seconds since the job was created, from the server's figure in the last event */
  var base = null, baseAt = 0, timer = setInterval(tick, 250);
  function tick() {
    if (!document.body.contains(clock)) { clearInterval(timer); return; }
    if (base !== null) clock.textContent = ((base + (Date.now() - baseAt) / 1000).toFixed(1)) + " s";
  }
  function stamp(data) { if (typeof data.elapsed_s === "number") { base = data.elapsed_s; baseAt = Date.now(); tick(); } }
  function end() { clearInterval(timer); cancel.remove(); var s = status.querySelector(".spinner"); if (s) s.remove(); onEnd(); }
  api("/api/jobs/" + jobId).then(function (job) {
    mode = job.mode;
    append(head, [el("div", { class: "row" },
      el("img", { src: job.image_url, alt: "query image", id: "query-image" })),
      el("div", { class: "muted small", text: job.image_name + " · " + (job.mode === "model" ? job.prompt_style + " prompt" + (job.samples > 1 ? ", " + job.samples + " samples" : "") : "offline clue pipeline") }),
      el("div", { class: "muted small" }, el("a", { href: "#/cases/" + job.case_id, id: "job-case", text: "its case" }), " · SHA-256 ", el("span", { class: "code", title: job.sha256, text: job.sha256.slice(0, 16) + "…" }))]);
  }, function (err) { clear(status).appendChild(el("div", { class: "banner error", text: err.message })); });
  function setStatus(message, spinning) {
    text.textContent = message;
    var spinner = status.querySelector(".spinner");
    if (!spinning && spinner) spinner.remove();
  }
  var source = new EventSource("/api/jobs/" + jobId + "/events");
  state.source = source;
  source.addEventListener("status", function (e) {
    var data = JSON.parse(e.data);
    stamp(data); setStatus(data.message, true);
    if (data.status === "cancelling") cancel.remove();  /* the page says the slot stays taken until the step returns */
    status.dataset.state = data.status;
    var img = document.getElementById("query-image");  // large images get their preview when the job starts
    if (data.status === "running" && img && !img.naturalWidth) img.src = img.src.split("?")[0] + "?t=" + Date.now();
  });
  source.addEventListener("turn", function (e) {
    var data = JSON.parse(e.data);
    stamp(data); mode = data.mode || mode;
    var box = samples[data.sample];
    if (!box) {
      box = samples[data.sample] = el("div", {}, data.samples > 1 ? el("h3", { text: "Sample " + (data.sample + 1) + " of " + data.samples }) : null);
      live.appendChild(box);
    }
    var node = renderTurn(data.turn, mode === "offline");
    var old = box.querySelector('[data-turn="' + data.turn.index + '"]');
    if (old) box.replaceChild(node, old); else box.appendChild(node);
    var calls = data.turn.tool_calls;
    if (mode === "offline") {
      var last = calls[calls.length - 1];
      setStatus(last ? (NEXT_STEP[last.name] || "Working…") : "Working…", true);
    } else {
      setStatus(calls.length ? "Turn " + (data.turn.index + 1) + ": its tools ran; asking the model again…"
        : "Turn " + (data.turn.index + 1) + " received; reading it for tool calls or a final answer…", true);
    }
  });
  source.addEventListener("result", function (e) {
    source.close();
    var job = JSON.parse(e.data);
    clear(live); status.remove();
    live.appendChild(renderTrajectory(job.trajectory, job.map_url, null, null, job.downloads));
    end();
    var answer = document.getElementById("answer");
    showOnPhone(answer);
    if (answer) answer.focus({ preventScroll: true });  /* keyboard and screen-reader users land on the result */
  });
  source.addEventListener("cancelled", function (e) {
    var data = JSON.parse(e.data);
    source.close(); stamp(data);
    setStatus(data.message || "Cancelled: nothing more runs for this job.", false);
    status.dataset.state = "cancelled";
    end();
  });
  source.addEventListener("error", function (e) {
    if (e.data) { source.close(); setStatus("Failed.", false); live.appendChild(renderError(JSON.parse(e.data).message)); end(); }
  });
}

/* ---------- Runs pages ---------- */

function metricName(key) { return key.replace(/_/g, " "); }
function metricValue(key, value) {
  if (value === null || value === undefined) return "–";
  if (/acc/.test(key)) return value.toFixed(1) + " %";
  if (/km/.test(key)) return value.toFixed(1) + " km";
  if (Number.isInteger(value)) return String(value);  /* counts ("answered") are not 10.00 */
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
}

function runsPage(main) {
  main.appendChild(el("h1", { text: "Evaluation runs" }));
  var box = el("div", { class: "card table-card" }, el("p", { class: "muted", text: "Loading…" }));
  main.appendChild(box);
  api("/api/runs").then(function (runs) {
    clear(box);
    if (!runs.length) {
      box.appendChild(el("div", { class: "empty", text: state.config.runs ? "No run directories found in the folders given with --runs." : "Start the server with --runs DIR to browse evaluation runs." }));
      return;
    }
    var keys = [];
    runs.forEach(function (r) { Object.keys(r.headline || {}).forEach(function (k) { if (keys.indexOf(k) < 0) keys.push(k); }); });
    var table = el("table", { class: "data", id: "runs" },
      el("thead", {}, el("tr", {}, el("th", { text: "run" }), el("th", { text: "model" }), el("th", { text: "created" }), el("th", { class: "num", text: "samples" }),
        el("th", { class: "num", text: "failed" }), keys.map(function (k) { return el("th", { class: "num", text: metricName(k) }); }))),
      el("tbody", {}, runs.map(function (r) {
        return el("tr", {}, el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(r.name), text: r.name })),
          el("td", { text: r.model || "–" }), el("td", { class: "small muted", style: "white-space:nowrap", text: (r.created_at || "–").replace("T", " ").slice(0, 16) }),
          el("td", { class: "num", text: r.reported ? r.n_finished + " / " + r.n_samples : "not reported" }),
          el("td", { class: "num", text: r.reported ? String(r.n_failed) : "–" }),
          keys.map(function (k) { return el("td", { class: "num", text: metricValue(k, (r.headline || {})[k]) }); }));
      })));
    box.appendChild(table);
    box.setAttribute("tabindex", "0"); box.setAttribute("aria-label", "runs (scrolls sideways)");
    box.appendChild(scrollCue(box));
  }, function (err) { clear(box).appendChild(el("div", { class: "banner error", text: err.message })); });
}

/* A table wider than its card says so (columns off-screen are otherwise invisible on a phone). */
function scrollCue(card) {
  var cue = el("div", { class: "scroll-cue", id: "scroll-cue", text: "More columns: scroll sideways →" });
  function check() { card.classList.toggle("scrolls", card.scrollWidth > card.clientWidth + 1 && card.scrollLeft + card.clientWidth < card.scrollWidth - 1); }
  card.addEventListener("scroll", check);
  window.addEventListener("resize", check);
  setTimeout(check, 0);
  return cue;
}

function sortable(table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0]; var rows = Array.prototype.slice.call(body.rows);
      var asc = th.dataset.asc !== "1"; th.dataset.asc = asc ? "1" : "0";
      rows.sort(function (a, b) {
        var x = a.cells[col].dataset.v || a.cells[col].textContent, y = b.cells[col].dataset.v || b.cells[col].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return asc ? r : -r;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
}

function runPage(main, name) {
  main.appendChild(el("div", { class: "crumbs" }, el("a", { href: "#/runs", text: "Runs" }), " / " + name));
  var box = el("div", {}, el("p", { class: "muted", text: "Loading…" }));
  main.appendChild(box);
  api("/api/runs/" + encodeURIComponent(name)).then(function (run) {
    clear(box);
    box.appendChild(el("h1", { text: name }));
    box.appendChild(el("p", { class: "muted" }, [run.model, run.dataset, run.protocol ? "protocol " + run.protocol : null, run.created_at].filter(Boolean).join(" · "),
      run.html_report ? [" · ", el("a", { href: run.html_report, target: "_blank", id: "html-report", text: "full HTML report (error map) ↗" })] : null));
    var files = run.downloads || {};
    if (Object.keys(files).length) box.appendChild(el("div", { class: "row downloads", id: "run-downloads" },
      el("span", { class: "muted small", text: "Download" }),
      Object.keys(files).map(function (f) { return el("a", { class: "button small", href: files[f], download: "", text: f }); })));
    if (run.reported) {
      box.appendChild(el("div", { class: "counts" }, Object.keys(run.status_counts).map(function (k) {
        return el("span", {}, statusPill(k), " " + run.status_counts[k]);
      })));
      var accKeys = Object.keys(run.metrics).filter(function (k) { return /^acc@/.test(k); });
      if (accKeys.length) box.appendChild(el("section", { class: "card", style: "margin-bottom:1rem" },
        el("h3", { text: "Accuracy within distance (% of samples within k km)" }),
        el("div", { class: "bars", id: "acc-bars" }, accKeys.map(function (k) {
          var v = run.metrics[k] || 0;
          return el("div", { class: "bar", title: k + ": " + metricValue(k, run.metrics[k]) },
            el("div", { class: "pct", text: String(Math.round(v)) }),
            el("div", { class: "fill", style: "height:" + Math.max(1, Math.round(v * 1.2)) + "px" }),
            el("div", { class: "lab", text: k.replace("acc@", "").replace(/km$/, "") }));
        }))));
      box.appendChild(el("div", { class: "metrics" }, Object.keys(run.metrics).filter(function (k) { return accKeys.indexOf(k) < 0; }).map(function (k) {
        var ci = run.ci95[k];
        return el("div", { class: "metric" }, el("div", { class: "k", text: metricName(k) }), el("div", { class: "v", text: metricValue(k, run.metrics[k]) }),
          ci && ci[0] !== null ? el("div", { class: "ci", text: "95 % CI " + metricValue(k, ci[0]) + " – " + metricValue(k, ci[1]) }) : null);
      })));
    } else {
      box.appendChild(el("div", { class: "banner info", text: "No summary.json yet: run `geosleuth report " + name + "` for metrics." }));
    }
    var runMap = runErrorMap(run.samples);
    if (runMap) box.appendChild(el("section", { class: "card", style: "margin-bottom:1rem" }, el("h3", { text: "Answers and ground truth" }), runMap));
    var filter = el("input", { type: "search", placeholder: "filter samples…", id: "filter" });
    box.appendChild(el("div", { class: "row", style: "justify-content:space-between" }, el("h2", { text: "Samples (" + run.samples.length + ")" }), filter));
    var cols = [["sample_id", "sample"], ["status", "status"], ["distance_km", "error km"], ["country_code", "true country"], ["confidence", "confidence"], ["turns", "turns"], ["tool_calls", "tool calls"]];
    var table = el("table", { class: "data", id: "samples" },
      el("thead", {}, el("tr", {}, cols.map(function (c) { return el("th", { class: c[0] === "sample_id" || c[0] === "status" || c[0] === "country_code" ? "" : "num", text: c[1] }); }))),
      el("tbody", {}, run.samples.map(function (s) {
        return el("tr", {}, cols.map(function (c) {
          var v = s[c[0]];
          if (c[0] === "sample_id") return el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(name) + "/" + encodeURIComponent(v), text: v }));
          if (c[0] === "status") return el("td", {}, statusPill(v));
          if (typeof v === "number") return el("td", { class: "num", "data-v": v, text: c[0] === "distance_km" ? v.toFixed(1) : (c[0] === "confidence" ? v.toFixed(2) : String(v)) });
          return el("td", { class: c[0] === "country_code" ? "" : "num", "data-v": c[0] === "distance_km" ? "1e12" : null, text: v === null || v === undefined ? "–" : String(v) });
        }));
      })));
    box.appendChild(el("div", { class: "card table-card" }, table));
    sortable(table);
    filter.addEventListener("input", function () {
      var q = filter.value.toLowerCase();
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) { r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? "" : "none"; });
    });
  }, function (err) { clear(box).appendChild(el("div", { class: "banner error", text: err.message })); });
}

var RUN_MAP_MAX = 2000;  /* samples drawn on a run's map; the HTML report and per_sample.csv have all */

function runErrorMap(rows) {
  var located = rows.filter(function (r) { return typeof r.true_lat === "number" && typeof r.true_lon === "number"; });
  if (!located.length) return null;
  var shown = located.slice(0, RUN_MAP_MAX);
  var layers = { points: [], lines: [] };
  shown.forEach(function (r) {
    var id = String(r.sample_id);
    layers.points.push({ lat: r.true_lat, lon: r.true_lon, kind: "truth", small: true, label: id + ": ground truth" });
    if (typeof r.pred_lat === "number" && typeof r.pred_lon === "number") {
      layers.points.push({ lat: r.pred_lat, lon: r.pred_lon, kind: "pred", small: true,
        label: id + ": answer" + (typeof r.distance_km === "number" ? ", " + fmt(r.distance_km, 1) + " km off" : "") });
      layers.lines.push([[r.pred_lat, r.pred_lon], [r.true_lat, r.true_lon]]);
    }
  });
  var note = shown.length < located.length ? el("div", { class: "muted small", text: "first " + shown.length + " of " + located.length + " samples shown" }) : null;
  return el("div", {}, mapCard("run-map", layers, mapLegend([["pred", "answer"], ["truth", "ground truth"], ["error", "answer–truth line"]])), note);
}

function samplePage(main, name, sampleId) {
  var runHref = "#/runs/" + encodeURIComponent(name);
  main.appendChild(el("div", { class: "crumbs" }, el("a", { href: "#/runs", text: "Runs" }), " / ", el("a", { href: runHref, text: name }), " / " + sampleId));
  var box = el("div", {}, el("p", { class: "muted", text: "Loading…" }));
  main.appendChild(box);
  api("/api/runs/" + encodeURIComponent(name) + "/sample?id=" + encodeURIComponent(sampleId)).then(function (data) {
    clear(box);
    var s = data.sample;
    var labels = Object.keys(s.labels || {}).map(function (k) { return [el("dt", { text: k }), el("dd", { text: s.labels[k] })]; });
    box.appendChild(el("div", { class: "grid2" },
      el("section", { class: "card" }, el("h1", { text: s.id }),
        data.image_url ? el("img", { class: "query-img", src: data.image_url, alt: "sample image" }) : el("p", { class: "muted", text: "(no image)" }),
        el("h2", { text: "Ground truth" }),
        el("dl", { class: "kv" }, s.lat !== null ? [el("dt", { text: "coordinates" }), el("dd", { class: "coords", text: s.lat.toFixed(5) + ", " + s.lon.toFixed(5) })] : null, labels,
          s.hint ? [el("dt", { text: "hint" }), el("dd", { text: s.hint })] : null,
          s.choices && s.choices.length ? [el("dt", { text: "choices" }), el("dd", { text: s.choices.join(" · ") + (s.answer ? " (answer " + s.answer + ")" : "") })] : null)),
      el("section", {}, data.trajectory ? renderTrajectory(data.trajectory, null, data.row ? data.row.distance_km : null, { lat: s.lat, lon: s.lon }, data.downloads) : el("div", { class: "card empty", text: "This sample has not finished in this run." }))));
    var sampleHref = function (id) { return runHref + "/" + encodeURIComponent(id); };
    box.insertBefore(el("nav", { class: "row pager", "aria-label": "samples of this run" },
      data.prev !== null ? el("a", { class: "button small", id: "prev-sample", href: sampleHref(data.prev), rel: "prev", text: "← " + data.prev }) : el("span", { class: "button small disabled", "aria-disabled": "true", text: "← first sample" }),
      data.next !== null ? el("a", { class: "button small", id: "next-sample", href: sampleHref(data.next), rel: "next", text: data.next + " →" }) : el("span", { class: "button small disabled", "aria-disabled": "true", text: "last sample →" })), box.firstChild);
  }, function (err) { clear(box).appendChild(el("div", { class: "banner error", text: err.message })); });
}

/* ---------- Cases ---------- */

function tagsOf(text) {
  return text.split(",").map(function (t) { return t.trim(); }).filter(Boolean);
}

function casesPage(main) {
  main.appendChild(el("h1", { text: "Cases" }));
  var name = el("input", { type: "text", id: "new-case-name", placeholder: "name of a new case", "aria-label": "name of a new case" });
  var make = el("button", { class: "primary", id: "new-case" }, "New case");
  var message = el("div");
  make.addEventListener("click", function () {
    clear(message);
    api("/api/cases", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: name.value || "untitled case" }) })
      .then(function (c) { location.hash = "#/cases/" + c.id; }, function (err) { message.appendChild(el("div", { class: "banner error", text: err.message })); });
  });
  main.appendChild(el("section", { class: "card case-form" }, el("div", { class: "row" }, name, make), message));
  var list = el("div", { class: "card table-card", style: "margin-top:1rem" }, el("p", { class: "muted", text: "Loading…" }));
  main.appendChild(list);
  api("/api/cases").then(function (cases) {
    clear(list);
    if (!cases.length) { list.appendChild(el("div", { class: "empty", text: "No cases yet: every upload opens one." })); return; }
    list.appendChild(el("table", { class: "data", id: "cases" },
      el("thead", {}, el("tr", {}, el("th", { text: "case" }), el("th", { text: "tags" }), el("th", { class: "num", text: "jobs" }), el("th", { text: "created" }))),
      el("tbody", {}, cases.map(function (c) {
        return el("tr", {}, el("td", { class: "wrap" }, el("a", { href: "#/cases/" + c.id, text: c.name })),
          el("td", {}, c.tags.map(function (t) { return el("span", { class: "tag", text: t }); })),
          el("td", { class: "num", text: String(c.n_jobs) }),
          el("td", { class: "small muted", text: new Date(c.created_at * 1000).toLocaleString() }));
      }))));
    list.appendChild(scrollCue(list));
  }, function (err) { clear(list).appendChild(el("div", { class: "banner error", text: err.message })); });
}

/* One re-run form: the same image with other settings, into the same case. */
function rerunForm(job, onDone) {
  var cfg = state.config;
  var engine = el("select", { "aria-label": "answered by", class: "rerun-engine" },
    cfg.model ? el("option", { value: "1", text: "Model: " + cfg.model }) : null,
    el("option", { value: "0", text: "Offline pipeline" }));
  var ocr = el("input", { type: "checkbox", checked: true, class: "rerun-ocr" });
  var style = el("select", { "aria-label": "prompt style" }, cfg.prompt_styles.map(function (s) { return el("option", { value: s, text: s, selected: s === cfg.prompt_style }); }));
  var tools = el("input", { type: "text", placeholder: "tools (comma-separated; empty: the style's)", "aria-label": "tools", style: "width:16rem" });
  function sync() { var m = engine.value === "1"; style.disabled = !m; tools.disabled = !m; ocr.disabled = m; }
  engine.addEventListener("change", sync); sync();
  var go = el("button", { class: "small rerun-go" }, "Re-run");
  go.addEventListener("click", function () {
    go.disabled = true;
    var body = { use_model: engine.value === "1", ocr: ocr.checked, prompt: style.value };
    if (engine.value === "1" && tools.value.trim()) body.tools = tagsOf(tools.value);
    api("/api/jobs/" + job.id + "/rerun", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
      .then(onDone, function (err) { go.disabled = false; alert(err.message); });
  });
  return el("div", { class: "rerun" }, engine, el("label", { class: "small" }, ocr, " OCR"), style, tools, go);
}

function answerText(a) {
  if (!a) return "no answer";
  return (placeLine(a) || "coordinates") + (a.lat !== null ? " (" + a.lat.toFixed(4) + ", " + a.lon.toFixed(4) + ")" : "");
}

function casePage(main, caseId) {
  main.appendChild(el("div", { class: "crumbs" }, el("a", { href: "#/cases", text: "Cases" }), " / " + caseId));
  var box = el("div", {}, el("p", { class: "muted", text: "Loading…" }));
  main.appendChild(box);
  function load() { api("/api/cases/" + encodeURIComponent(caseId)).then(render, function (err) { clear(box).appendChild(el("div", { class: "banner error", text: err.message })); }); }
  function render(c) {
    clear(box);
    var name = el("input", { type: "text", id: "case-name", value: c.name, "aria-label": "case name" });
    var notes = el("textarea", { id: "case-notes", "aria-label": "notes" }); notes.value = c.notes;
    var tags = el("input", { type: "text", id: "case-tags", value: c.tags.join(", "), "aria-label": "tags, comma-separated" });
    var saved = el("span", { class: "muted small", id: "case-saved", role: "status" });
    var save = el("button", { class: "primary", id: "case-save" }, "Save");
    save.addEventListener("click", function () {
      api("/api/cases/" + c.id, { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify({ name: name.value, notes: notes.value, tags: tagsOf(tags.value) }) })
        .then(function () { saved.textContent = "Saved " + new Date().toLocaleTimeString(); }, function (err) { saved.textContent = err.message; });
    });
    var del = el("button", { class: "danger", id: "case-delete" }, "Delete case and its files");
    del.addEventListener("click", function () {
      if (!confirm("Delete this case, its " + c.jobs.length + " job(s) and their files?")) return;
      api("/api/cases/" + c.id, { method: "DELETE" }).then(function () { location.hash = "#/cases"; }, function (err) { saved.textContent = err.message; });
    });
    var add = el("input", { type: "file", accept: "image/*", multiple: true, id: "case-add", "aria-label": "add images to this case" });
    add.addEventListener("change", function () {
      var form = new FormData();
      Array.prototype.forEach.call(add.files, function (f) { form.append("image", f); });
      form.append("case", c.id); form.append("use_model", state.config.model ? "1" : "0");
      api("/api/locate", { method: "POST", body: form }).then(load, function (err) { saved.textContent = err.message; });
    });
    box.appendChild(el("section", { class: "card case-form" }, el("h1", { class: "case-meta", text: c.name }),
      el("label", { class: "field" }, "Name", name), el("label", { class: "field" }, "Notes", notes),
      el("label", { class: "field" }, "Tags (comma-separated)", tags),
      el("div", { class: "row" }, save, saved, el("span", { style: "margin-left:auto" }), del),
      el("label", { class: "field" }, "Add images to this case", add)));
    var first = {};
    c.jobs.forEach(function (j) { if (j.answer && j.answer.lat !== null && !first[j.sha256]) first[j.sha256] = j; });
    var table = el("table", { class: "data", id: "case-jobs" },
      el("thead", {}, el("tr", {}, ["image", "settings", "status", "answer", "± km", "from the image's first answer", "re-run with other settings"].map(function (h) { return el("th", { text: h }); }))),
      el("tbody", {}, c.jobs.map(function (j) {
        var s = j.settings || {}, a = j.answer, ref = first[j.sha256];
        var settings = s.mode === "model" ? s.model + " · " + s.prompt_style + (s.samples > 1 ? " ×" + s.samples : "") + (s.tools ? " · tools " + s.tools.join(",") : "")
          : "offline" + (s.offline_use_ocr === false ? ", no OCR" : "");
        var apart = a && a.lat !== null && ref && ref.id !== j.id ? fmt(haversineKm(a.lat, a.lon, ref.answer.lat, ref.answer.lon), 1) + " km" : "–";
        return el("tr", { "data-job": j.id }, el("td", { class: "wrap" }, el("a", { href: "#/locate/" + j.id, text: j.image_name }),
          el("div", { class: "muted small", text: j.sha256.slice(0, 12) + (j.source_job ? " · re-run" : "") })),
          el("td", { class: "small", text: settings }), el("td", {}, jobPill(j)),
          el("td", { class: "wrap", text: answerText(a) }), el("td", { class: "num", text: a && a.radius_km ? fmt(a.radius_km, a.radius_km < 10 ? 1 : 0) : "–" }),
          el("td", { class: "num", text: apart }), el("td", {}, rerunForm(j, load)));
      })));
    var card = el("div", { class: "card table-card", style: "margin-top:1rem" }, table);
    box.appendChild(el("h2", { text: "Jobs side by side (" + c.jobs.length + ")" }));
    box.appendChild(card); card.setAttribute("tabindex", "0"); card.appendChild(scrollCue(card));
    if (c.jobs.some(function (j) { return j.status === "queued" || j.status === "running" || j.status === "cancelling"; }))
      setTimeout(function () { if (document.body.contains(box) && location.hash === "#/cases/" + caseId) load(); }, 1500);
  }
  load();
}

/* ---------- router ---------- */

function route() {
  if (state.source) { state.source.close(); state.source = null; }
  var main = clear(document.getElementById("main"));
  var parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  var page = parts[0] || "locate";
  Array.prototype.forEach.call(document.querySelectorAll("nav a"), function (a) { a.classList.toggle("active", a.dataset.nav === page); });
  if (page === "runs" && parts[2]) samplePage(main, parts[1], parts.slice(2).join("/"));
  else if (page === "runs" && parts[1]) runPage(main, parts[1]);
  else if (page === "runs") runsPage(main);
  else if (page === "cases" && parts[1]) casePage(main, parts[1]);
  else if (page === "cases") casesPage(main);
  else locatePage(main, parts[1]);
}

api("/api/config").then(function (cfg) {
  state.config = cfg;
  var engine = document.getElementById("engine");
  append(engine, cfg.model ? ["model ", el("b", { text: cfg.model }), cfg.endpoint ? " at " + cfg.endpoint : ""] : [el("b", { text: "offline clue pipeline" }), " (no model configured)"]);
  window.addEventListener("hashchange", route);
  route();
}, function (err) {
  document.getElementById("main").appendChild(el("div", { class: "banner error", text: "Cannot reach the geosleuth server: " + err.message }));
});
