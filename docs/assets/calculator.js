/* The course's calculators (course/pages/calculators/): a lesson's arithmetic on a reader's own
   model and card, with the lab's recorded points on the same chart and the gap between the two
   stated, and a learner's own run (the JSON the lesson zip's compare.py writes) beside them.

   course.js loads this file (and the form, from a file beside the page) when a calculator's slot
   comes near the screen or its button is pressed, then calls CourseCalculator.mount(form) once
   per form (instant navigation brings new pages, and new slots).
   The numbers come from the form's data-numbers attribute; nothing is fetched.

   The arithmetic below transcribes the lab's own functions; tests/pages/test_calculator_arith.py
   runs it in Chromium against them (the lab kit's configs.py, shapes.py and facts.py rules,
   lesson 2.5's planner.py, lesson 2.3's pdlab.py) over every shipped config. */
(function () {
  "use strict";
  var VERSION = 1;

  /* ---- arithmetic ------------------------------------------------------------------------- */
  var A = {};
  var QK_NORM_TYPES = { qwen3: true, qwen3_moe: true };
  var FP8_SCALE_BYTES = 4;
  var fdiv = function (a, b) { return Math.floor(a / b); };  // Python's // on whole numbers

  /* labkit/configs.py */
  A.headSize = function (cfg) {
    return Math.trunc(cfg.head_dim || fdiv(cfg.hidden_size, cfg.num_attention_heads));
  };
  A.kvHeads = function (cfg) { return Math.trunc(cfg.num_key_value_heads || cfg.num_attention_heads); };
  A.isLatent = function (cfg) { return Boolean(cfg.kv_lora_rank); };
  A.kvBytesPerToken = function (cfg, nbytes, heads) {
    if (nbytes === undefined) nbytes = 2;
    if (A.isLatent(cfg)) return cfg.num_hidden_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * nbytes;
    var count = heads === undefined || heads === null ? A.kvHeads(cfg) : heads;
    return 2 * cfg.num_hidden_layers * count * A.headSize(cfg) * nbytes;
  };
  A.weightCount = function (cfg) {
    var h = cfg.hidden_size, d = A.headSize(cfg), layers = cfg.num_hidden_layers;
    var q = cfg.num_attention_heads * d, kv = A.kvHeads(cfg) * d;
    var perLayer = 2 * h * q + 2 * h * kv + 3 * h * cfg.intermediate_size + 2 * h;
    if (QK_NORM_TYPES[cfg.model_type]) perLayer += 2 * d;
    var tables = (cfg.tie_word_embeddings ? 1 : 2) * cfg.vocab_size * h;
    return layers * perLayer + tables + h;
  };
  A.weightBytes = function (cfg, nbytes) { return A.weightCount(cfg) * (nbytes === undefined ? 2 : nbytes); };
  var DTYPE_BYTES = { float32: 4, float: 4, fp32: 4, bfloat16: 2, bf16: 2, float16: 2, half: 2,
    fp16: 2, float8_e4m3fn: 1, float8_e5m2: 1, fp8: 1 };
  A.numberBytes = function (cfg) {
    var name = String(cfg.torch_dtype || cfg.dtype || "").replace(/^torch\./, "");
    return Object.prototype.hasOwnProperty.call(DTYPE_BYTES, name) ? [DTYPE_BYTES[name], name] : [2, ""];
  };
  /* labkit/configs.py load_config: a multimodal config's text_config fields on top */
  A.languageFields = function (raw) {
    var cfg = {};
    Object.keys(raw).forEach(function (k) { if (k !== "text_config") cfg[k] = raw[k]; });
    var text = raw.text_config;
    if (text && typeof text === "object" && !Array.isArray(text)) {
      Object.keys(text).forEach(function (k) { cfg[k] = text[k]; });
    }
    return cfg;
  };

  /* labkit/facts.py: the engines' memory rules */
  A.conversations = function (cache, bytesPerToken, tokens, block) {
    if (cache <= 0) return 0;
    if (!block || block <= 1) return fdiv(cache, bytesPerToken * tokens);
    var blocks = fdiv(cache, block * bytesPerToken);
    return fdiv(blocks, Math.ceil(tokens / block));
  };
  A.vllm = function (total, share, weights, nonTorch, activation, graphs) {
    var requested = Math.ceil(share * total);
    return { requested: requested, cache: requested - weights - nonTorch - activation - (graphs || 0) };
  };
  A.transformers = function (total, context, weights, share) {
    var free = total - context - weights;
    return { free: free, cache: Math.trunc(Math.max(free, 0) * share) };
  };
  A.llamaCpp = function (context, bytesPerToken) { return context * bytesPerToken; };

  /* labkit/shapes.py: one decoder and the way it keeps its keys and values */
  A.shape = function (o) {
    return { name: o.name || "", layers: o.layers, hidden: o.hidden, heads: o.heads, head_dim: o.head_dim,
      intermediate: o.intermediate, vocab: o.vocab, kv_heads: o.kv_heads || 0,
      kv_lora_rank: o.kv_lora_rank || 0, rope_dim: o.rope_dim || 0,
      window: o.window === undefined ? null : o.window, qk_norm: Boolean(o.qk_norm), tied: Boolean(o.tied) };
  };
  A.shapeOfConfig = function (cfg, name) {
    return A.shape({ name: name || cfg.model_type || "model", layers: cfg.num_hidden_layers,
      hidden: cfg.hidden_size, heads: cfg.num_attention_heads, head_dim: A.headSize(cfg),
      intermediate: cfg.intermediate_size, vocab: cfg.vocab_size, kv_heads: A.kvHeads(cfg),
      qk_norm: Boolean(QK_NORM_TYPES[cfg.model_type]), tied: Boolean(cfg.tie_word_embeddings) });
  };
  A.isWindowLayer = function (s, layer) { return s.window !== null && layer % 2 === 0; };
  A.windowLayers = function (s) {
    var n = 0;
    for (var i = 0; i < s.layers; i++) if (A.isWindowLayer(s, i)) n += 1;
    return n;
  };
  A.attentionParams = function (s) {
    var h = s.hidden, q = s.heads, d = s.head_dim;
    if (s.kv_lora_rank) {
      var r = s.kv_lora_rank, rope = s.rope_dim;
      return q * (d + rope) * h + (r + rope) * h + r + q * (d + d) * r + h * q * d;
    }
    var norms = s.qk_norm ? 2 * d : 0;
    return (q + 2 * s.kv_heads) * d * h + h * q * d + norms;
  };
  A.shapeWeightBytes = function (s) {
    var perLayer = A.attentionParams(s) + 3 * s.hidden * s.intermediate + 2 * s.hidden;
    var tables = (s.tied ? 1 : 2) * s.vocab * s.hidden;
    return (s.layers * perLayer + tables + s.hidden) * 2;
  };
  A.shapeWeightBytesRead = function (s) { return A.shapeWeightBytes(s) - (s.tied ? 0 : s.vocab * s.hidden * 2); };
  /* lesson 2.4's decode_speed.py: the bytes bound, bandwidth / (weights read + depth × cache per token) */
  A.decodeBound = function (bandwidth, weightsRead, perToken, depth) { return bandwidth / (weightsRead + depth * perToken); };
  A.layerBytes = function (s, fmt) {
    fmt = fmt || "bf16";
    if (fmt !== "bf16" && fmt !== "fp8") throw new Error("cache format " + fmt + ": expected bf16 or fp8");
    if (s.kv_lora_rank) {
      if (fmt !== "bf16") throw new Error("the fp8 cache is written for designs without latents");
      return (s.kv_lora_rank + s.rope_dim) * 2;
    }
    var perVector = s.head_dim * (fmt === "fp8" ? 1 : 2);
    return 2 * s.kv_heads * (perVector + (fmt === "fp8" ? FP8_SCALE_BYTES : 0));
  };
  A.bytesPerToken = function (s, fmt) { return s.layers * A.layerBytes(s, fmt); };
  A.cacheBytes = function (s, tokens, fmt) {
    var kept = s.window ? Math.min(tokens, s.window) : tokens;
    var wl = A.windowLayers(s), full = s.layers - wl;
    return (full * tokens + wl * kept) * A.layerBytes(s, fmt);
  };
  /* lesson 2.6's designs.py: one model built five ways */
  A.designs = function (base, kv, rank, rope, window) {
    var with_ = function (o) { var s = Object.assign({}, base, o); return s; };
    return {
      mha: with_({ name: "mha", kv_heads: base.heads }),
      gqa: with_({ name: "gqa", kv_heads: kv }),
      mqa: with_({ name: "mqa", kv_heads: 1 }),
      mla: with_({ name: "mla", kv_heads: 0, kv_lora_rank: rank, rope_dim: rope }),
      sliding: with_({ name: "sliding", kv_heads: kv, window: window })
    };
  };

  /* lesson 2.5's planner.py: transformers' memory planner, on paper, as two releases plan (the
     engine's release picks the transcription): 5.17 solves for the batch and the blocks together;
     5.24 keeps the batch at its setting and counts the cache in sectors (P.planSectors) */
  var P = A.planner = {};
  P.DEFAULT_MAX_BATCH_TOKENS = 8192; P.MIN_MAX_BATCH_TOKENS = 256; P.CACHE_FILL_PER_BATCH = 0.1;
  P.PADDING_BLOCKS = 2; P.SECTOR_ALIGN = 128; P.MAX_REQUESTS_PER_BATCH = 1024;
  P.RELEASES = ["5.17", "5.24"];
  P.engine = function (o) {
    o = o || {};
    return { block_size: o.block_size || 256, cache_bytes: o.cache_bytes || 2, activation_bytes: o.activation_bytes || 2,
      attention_masks: o.attention_masks === undefined ? 1 : o.attention_masks, io_copies: o.io_copies || 1,
      max_blocks_per_request: o.max_blocks_per_request || 0, output_rows: o.output_rows || 1,
      release: o.release || "5.17", logits_to_keep: o.logits_to_keep === undefined ? true : Boolean(o.logits_to_keep),
      max_requests_per_batch: o.max_requests_per_batch === undefined ? P.MAX_REQUESTS_PER_BATCH : o.max_requests_per_batch,
      max_batch_tokens: o.max_batch_tokens === undefined ? null : o.max_batch_tokens };
  };
  /* Python's // on whole numbers, exact however close the quotient comes to a whole number */
  var idiv = function (a, b) {
    var q = Math.floor(a / b);
    if (q * b > a) q -= 1; else if ((q + 1) * b <= a) q += 1;
    return q;
  };
  var gcd = function (a, b) { while (b) { var t = a % b; a = b; b = t; } return a; };
  var lcm = function (a, b) { return a === 0 || b === 0 ? 0 : a / gcd(a, b) * b; };
  P.headDim = function (cfg) { return Math.trunc(cfg.head_dim || fdiv(cfg.hidden_size, cfg.num_attention_heads)); };
  P.cacheBytesPerToken = function (cfg, eng) {
    return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * P.headDim(cfg) * eng.cache_bytes;
  };
  function PlanError(message) { this.message = message; }
  P.PlanError = PlanError;
  P.peaks = function (cfg, eng) {
    var types = cfg.layer_types || [];
    if (cfg.use_sliding_window || types.some(function (t) { return t !== "full_attention"; })) {
      throw new PlanError("this transcription covers models whose layers all use full attention");
    }
    var a = eng.activation_bytes, page = cfg.num_key_value_heads * P.headDim(cfg);
    return [
      ["lm_head", [cfg.hidden_size * a + cfg.vocab_size * 4, 0]],
      ["attention", [a * (cfg.hidden_size + cfg.num_attention_heads * P.headDim(cfg) + 2 * page), 2 * page * a]]
    ];
  };
  P.coefficients = function (cfg, eng, peak) {
    var dm = peak[0], dn = peak[1], k = eng.io_copies, groups = 1;
    var indexN = k * groups * 8;
    var batchM = k * 7 * 4 + k * eng.output_rows * 4 + k * groups * eng.max_blocks_per_request * 4
      + k * groups * 8 + k * groups * 8;
    var mask = k * eng.attention_masks * eng.activation_bytes;
    var cacheN = P.cacheBytesPerToken(cfg, eng);
    return { activation_m: dm, activation_n: dn, cache_n: cacheN, index_n: indexN, batch_m: batchM,
      cm: dm + batchM, cn: dn + cacheN + indexN, cmn: mask, cmm: mask };
  };
  P.largestRoot = function (a, b, c) {
    if (a === 0) return Math.trunc(-c / b);
    var disc = Math.pow(b, 2) - 4 * a * c;
    if (disc < 0) throw new PlanError("no real solution (discriminant " + disc + ")");
    var root = (-b + Math.sqrt(disc)) / (2 * a);
    if (root < 0) throw new PlanError("no positive solution (root " + root + ")");
    return Math.floor(root);
  };
  P.solve = function (cfg, eng, available, m, blocks, fill) {
    var answers = P.peaks(cfg, eng).map(function (named) {
      var co = P.coefficients(cfg, eng, named[1]);
      var cm = co.cm, cn = co.cn, cmn = co.cmn, cmm = co.cmm;
      if (m === null && blocks === null) {
        var pages = P.largestRoot(cmn * fill + cmm * Math.pow(fill, 2), cn + cm * fill, -available);
        return [Math.trunc(pages * fill), fdiv(Math.trunc(pages), eng.block_size)];
      }
      if (blocks === null) {
        var pagesM = Math.floor((available - cm * m - cmm * Math.pow(m, 2)) / (cn + cmn * m));
        return [m, fdiv(pagesM, eng.block_size)];
      }
      var n = blocks * eng.block_size;
      return [Math.trunc(P.largestRoot(cmm, cm + cmn * n, cn * n - available)), blocks];
    });
    return [Math.min.apply(null, answers.map(function (x) { return x[0]; })),
      Math.min.apply(null, answers.map(function (x) { return x[1]; }))];
  };
  P.footprint = function (cfg, eng, m, blocks) {
    var n = blocks * eng.block_size, worst = -1, name = "";
    P.peaks(cfg, eng).forEach(function (named) {
      var co = P.coefficients(cfg, eng, named[1]);
      var value = co.cn * n + co.cm * m + co.cmn * n * m + co.cmm * m * m;
      if (value > worst) { worst = value; name = named[0]; }
    });
    return [worst, name];
  };
  P.plan = function (cfg, available, eng, maxBatchTokens, numBlocks) {
    eng = eng || P.engine();
    var m = maxBatchTokens || eng.max_batch_tokens;
    var blocks = numBlocks === undefined ? null : numBlocks, got;
    if (eng.release === "5.24") return P.planSectors(cfg, available, eng, m, blocks);
    if (m === undefined) m = null;
    if (m === null && blocks === null) {
      var ceiling = P.solve(cfg, eng, available, null, null, P.CACHE_FILL_PER_BATCH)[0];
      m = Math.max(Math.min(P.DEFAULT_MAX_BATCH_TOKENS, ceiling), P.MIN_MAX_BATCH_TOKENS);
      got = P.solve(cfg, eng, available, m, null, null); m = got[0]; blocks = got[1];
    } else if (m === null || blocks === null) {
      got = P.solve(cfg, eng, available, m, blocks, null); m = got[0]; blocks = got[1];
    }
    if (m <= 0 || blocks <= 0) throw new PlanError("no room for a cache: max_batch_tokens " + fmt(m, 0) + ", blocks " + fmt(blocks, 0));
    var fp = P.footprint(cfg, eng, m, blocks);
    if (fp[0] > available) throw new PlanError("the footprint " + fmt(fp[0], 0) + " B is more than the " + fmt(available, 0) + " B available");
    var n = blocks * eng.block_size;
    var peak = P.peaks(cfg, eng).filter(function (x) { return x[0] === fp[1]; })[0][1];
    var co = P.coefficients(cfg, eng, peak);
    var lines = { activations: co.activation_m * m + co.activation_n * n, batch_tensors: co.batch_m * m + co.index_n * n,
      attention_mask: co.cmn * m * n + co.cmm * m * m, cache: co.cache_n * n };
    lines.padding = 0;  // 5.17 allocates its two padding blocks outside the share
    var allocated = (blocks + P.PADDING_BLOCKS) * eng.block_size * co.cache_n;
    return P.result(cfg, eng, available, [m, blocks], allocated, fp, lines, {});
  };
  /* a plan as both releases give it: (M, blocks), the cache's bytes, the budget's lines */
  P.result = function (cfg, eng, available, plan, allocated, footprint, lines, extra) {
    var m = plan[0], blocks = plan[1];
    lines.rounding = available - Object.keys(lines).reduce(function (sum, k) { return sum + lines[k]; }, 0);
    var out = { release: eng.release, available: available, max_batch_tokens: m, num_blocks: blocks };
    Object.keys(extra).forEach(function (k) { out[k] = extra[k]; });
    out.block_size = eng.block_size; out.cache_tokens = blocks * eng.block_size;
    out.cache_bytes_per_token = P.cacheBytesPerToken(cfg, eng); out.cache_bytes_allocated = allocated;
    out.footprint = footprint[0]; out.binding_peak = footprint[1]; out.lines = lines;
    return out;
  };
  /* 5.24's per-unit costs: of one batch token, one cache token beside the cache, one sector */
  P.sectorCosts = function (cfg, eng) {
    P.peaks(cfg, eng);  // full attention only, as for 5.17
    var a = eng.activation_bytes, hd = P.headDim(cfg);
    var heads = cfg.num_attention_heads, kv = cfg.num_key_value_heads;
    // SDPA repeats the keys and values read back from the cache to every query head
    var atPeak = eng.attention_masks === 0 ? 2 * kv : 2 * heads + kv;
    var lmHead = cfg.hidden_size * a + cfg.vocab_size * 4;  // a hidden state and its logits
    var attention = a * (cfg.hidden_size + heads * hd + 2 * kv * hd + atPeak * hd);
    var perM = Math.max(eng.logits_to_keep ? 0 : lmHead, attention);
    var k = eng.io_copies, groups = 1;
    var batchM = k * (7 * 4 + eng.output_rows * 4 + groups * eng.max_blocks_per_request * 4) + k * groups * (8 + 8);
    var blockBytes = P.cacheBytesPerToken(cfg, eng) * eng.block_size;
    // no bytes a block: planner.py stops on a division by zero; the form says there is no cache
    if (!(blockBytes > 0)) throw new PlanError("a cache block of " + blockBytes + " bytes");
    var sector = lcm(blockBytes, P.SECTOR_ALIGN);
    var sectorTokens = idiv(sector, blockBytes) * eng.block_size;
    var readN = atPeak * hd * a, indexN = k * groups * 8;
    var logitRows = eng.logits_to_keep ? eng.max_requests_per_batch * lmHead : 0;
    return { activation_m: perM, batch_m: batchM, per_m: perM + batchM, read_n: readN, index_n: indexN,
      sector: sector, sector_tokens: sectorTokens, block_bytes: blockBytes,
      per_sector: sector + sectorTokens * (readN + indexN), fixed: 2 * sector + logitRows, logit_rows: logitRows,
      mask: k * eng.attention_masks * a };
  };
  /* transformers 5.24's planner (infer_max_batch_tokens_and_num_sectors), line by line */
  P.planSectors = function (cfg, available, eng, maxBatchTokens, numBlocks) {
    var co = P.sectorCosts(cfg, eng);
    var m = maxBatchTokens || P.DEFAULT_MAX_BATCH_TOKENS, sectors;
    var mask = function (n) { return co.mask * m * (n * co.sector_tokens + m); };
    if (numBlocks !== null && numBlocks !== undefined) {
      sectors = Math.max(1, Math.ceil(numBlocks * co.block_bytes / co.sector));
    } else {
      sectors = idiv(available - co.fixed - m * co.per_m, co.per_sector);
      var perSectorMask = mask(sectors + 1) - mask(sectors);
      sectors -= Math.ceil(mask(sectors) / (co.per_sector + perSectorMask));
    }
    var used = co.fixed + m * co.per_m + sectors * co.per_sector + mask(sectors);
    if (m <= 0 || sectors <= 0) throw new PlanError("no room for a cache: max_batch_tokens " + fmt(m, 0) + ", sectors " + fmt(sectors, 0));
    if (used > available) throw new PlanError("the footprint " + fmt(used, 0) + " B is more than the " + fmt(available, 0) + " B available");
    var n = sectors * co.sector_tokens;
    var lines = { activations: co.activation_m * m + co.logit_rows + co.read_n * n,
      batch_tensors: co.batch_m * m + co.index_n * n, attention_mask: mask(sectors),
      cache: P.cacheBytesPerToken(cfg, eng) * n,
      padding: 2 * co.sector };  // the two padding sectors, inside the share in 5.24
    return P.result(cfg, eng, available, [m, idiv(n, eng.block_size)], (sectors + 2) * co.sector,
      [used, "attention"], lines, { num_sectors: sectors });
  };
  P.conversations = function (blocks, blockSize, context) { return fdiv(blocks, Math.ceil(context / blockSize)); };
  P.budget = function (cfg, total, context, weights, fraction, eng, contexts) {
    eng = eng || P.engine();
    contexts = contexts || { "8k": 8192, "32k": 32768, full: 40960 };
    var free = total - context - weights;
    var available = Math.trunc(free * fraction);
    var out = { total: total, context: context, weights: weights, free: free, fraction: fraction,
      available: available, slack: free - available,
      available_if_whole_card: Math.trunc(total * fraction) - context - weights, conversations: {} };
    try {
      out.plan = P.plan(cfg, available, eng);
    } catch (e) {
      if (!(e instanceof PlanError)) throw e;
      out.plan = null; out.problem = e.message; out.cache_tokens = 0;
      Object.keys(contexts).forEach(function (k) { out.conversations[k] = 0; });
      return out;
    }
    out.cache_tokens = out.plan.cache_tokens;
    Object.keys(contexts).forEach(function (k) {
      out.conversations[k] = P.conversations(out.plan.num_blocks, eng.block_size, contexts[k]);
    });
    return out;
  };

  /* lesson 2.3's pdlab.py: one layer's matrix products against the two limits */
  var R = A.roofline = {};
  R.layerMatrices = function (cfg) {
    var h = cfg.hidden_size, d = A.headSize(cfg), i = cfg.intermediate_size;
    var q = cfg.num_attention_heads * d, kv = A.kvHeads(cfg) * d;
    return { q: [q, h], k: [kv, h], v: [kv, h], o: [h, q], gate: [i, h], up: [i, h], down: [h, i] };
  };
  R.fusedProducts = function (cfg) {
    var m = R.layerMatrices(cfg);
    return [[m.q[0] + m.k[0] + m.v[0], m.q[1]], m.o, [m.gate[0] + m.up[0], m.gate[1]], m.down];
  };
  R.flops = function (tokens, shapes) { return shapes.reduce(function (s, x) { return s + 2 * tokens * x[0] * x[1]; }, 0); };
  R.moved = function (tokens, shapes) {
    return shapes.reduce(function (s, x) { return s + 2 * (x[0] * x[1] + tokens * x[1] + tokens * x[0]); }, 0);
  };
  R.intensity = function (tokens, shapes) { return R.flops(tokens, shapes) / R.moved(tokens, shapes); };
  R.tokensForIntensity = function (target, shapes) {
    var a = shapes.reduce(function (s, x) { return s + x[0] * x[1]; }, 0);
    var b = shapes.reduce(function (s, x) { return s + x[0] + x[1]; }, 0);
    return a > target * b ? target * a / (a - target * b) : Infinity;
  };
  R.time = function (flops, moved, peak, bandwidth) {
    var compute = flops / peak, memory = moved / bandwidth;
    return [Math.max(compute, memory), compute >= memory ? "arithmetic" : "memory"];
  };

  /* ---- numbers as a reader reads them ----------------------------------------------------- */
  var UNIT = { "": 1, B: 1, KiB: 1024, MiB: 1048576, GiB: 1073741824, "GB/s": 1e9, "TB/s": 1e12,
    "TFLOP/s": 1e12, tok: 1, "µs": 1e-6, ms: 1e-3, s: 1 };
  var NF = {};
  function fmt(x, decimals) {
    var key = String(decimals);
    if (!NF[key]) NF[key] = new Intl.NumberFormat("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
    var text = NF[key].format(x);
    return text === "-0" ? "0" : text;
  }
  function binary(bytes) {
    var units = [["GiB", 1073741824, 2], ["MiB", 1048576, 1], ["KiB", 1024, 1]];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(bytes) >= units[i][1]) {
        var v = bytes / units[i][1];
        return fmt(v, Number.isInteger(v) ? 0 : units[i][2]) + "\u00a0" + units[i][0];
      }
    }
    return fmt(bytes, 0) + "\u00a0B";
  }
  function shown(value, unit) {
    if (typeof value === "string") return value;
    if (value === null || value === undefined || !isFinite(value)) return "–";
    if (unit === "B") return fmt(value, 0) + "\u00a0B" + (Math.abs(value) >= 1024 ? " (" + binary(value) + ")" : "");
    if (unit === "MiB") { var mib = value / UNIT.MiB; return fmt(mib, Number.isInteger(mib) ? 0 : 1) + "\u00a0MiB"; }
    if (unit === "GiB") return fmt(value / UNIT.GiB, 2) + "\u00a0GiB";
    if (unit === "tok") return tokens(value);
    if (unit === "µs") return fmt(value / UNIT["µs"], value < 1e-4 ? 1 : 0) + "\u00a0µs";
    if (unit === "tok/s") return fmt(value, value < 100 ? 1 : 0) + "\u00a0tok/s";
    if (unit === "TFLOP/s") return fmt(value / 1e12, 1) + "\u00a0TFLOP/s";
    return fmt(value, Number.isInteger(value) ? 0 : 1);
  }
  function percent(ratio) {
    var p = ratio * 100, a = Math.abs(p);
    var decimals = a >= 1 || a === 0 ? 1 : Math.min(6, Math.ceil(-Math.log10(a)) + 1);
    return (ratio > 0 ? "+" : "") + fmt(p, decimals) + "\u00a0%";
  }
  function tokens(n) { return fmt(n, 0) + (n === 1 ? " token" : " tokens"); }
  function signed(text, x) { return (x > 0 ? "+" : "") + text; }

  /* ---- the chart: hand-drawn SVG ---------------------------------------------------------- */
  var SVG = "http://www.w3.org/2000/svg";
  var W = 640, H = 340, M = { l: 70, r: 14, t: 14, b: 46 };
  /* the drawing's width follows its box (a phone's text stays readable), within 360-640 units */
  function size(host) {
    W = Math.round(Math.max(360, Math.min(640, host.clientWidth || 640)));
    H = Math.round(Math.max(250, W * 0.53));
  }
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  function niceTicks(lo, hi, count) {
    var span = hi - lo, step = Math.pow(10, Math.floor(Math.log10(span / count)));
    var err = span / count / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    var ticks = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
    return ticks;
  }
  function axis(spec) {
    var lo = spec.min, hi = spec.max;
    if (spec.log) {
      var base = spec.base || 10, a = Math.log(lo) / Math.log(base), b = Math.log(hi) / Math.log(base);
      var ticks = [];
      for (var e = Math.ceil(a - 1e-9); e <= b + 1e-9; e += spec.every || 1) ticks.push(Math.pow(base, e));
      return { at: function (x) { return (Math.log(x) / Math.log(base) - a) / (b - a); }, ticks: ticks };
    }
    var f = spec.unit || 1;
    var ticks = niceTicks(lo / f, hi / f, spec.count || (W < 500 ? 3 : 5)).map(function (t) { return t * f; });
    return { at: function (x) { return (x - lo) / (hi - lo); }, ticks: ticks };
  }
  function draw(host, c) {
    size(host);
    host.textContent = "";
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": c.label, class: "course-calc__svg" }, host);
    var xa = axis(c.x), ya = axis(c.y);
    var px = function (x) { return M.l + xa.at(x) * (W - M.l - M.r); };
    var py = function (y) { return H - M.b - ya.at(y) * (H - M.t - M.b); };
    var inside = function (x, y) { return x >= c.x.min && x <= c.x.max && y >= c.y.min && y <= c.y.max; };
    var g = el("g", { class: "course-calc__axes" }, svg);
    ya.ticks.forEach(function (t) {
      el("line", { x1: M.l, x2: W - M.r, y1: py(t), y2: py(t), class: "course-calc__grid-line" }, g);
      el("text", { x: M.l - 6, y: py(t) + 4, "text-anchor": "end" }, g).textContent = c.y.tick(t);
    });
    xa.ticks.forEach(function (t) {
      el("line", { x1: px(t), x2: px(t), y1: H - M.b, y2: H - M.b + 4, class: "course-calc__tick" }, g);
      el("text", { x: px(t), y: H - M.b + 17, "text-anchor": "middle" }, g).textContent = c.x.tick(t);
    });
    el("line", { x1: M.l, x2: W - M.r, y1: H - M.b, y2: H - M.b, class: "course-calc__axis-line" }, g);
    el("line", { x1: M.l, x2: M.l, y1: M.t, y2: H - M.b, class: "course-calc__axis-line" }, g);
    el("text", { x: (M.l + W - M.r) / 2, y: H - 6, "text-anchor": "middle", class: "course-calc__axis-label" }, g).textContent = c.x.label;
    el("text", { x: 14, y: (M.t + H - M.b) / 2, "text-anchor": "middle", transform: "rotate(-90 14 " + (M.t + H - M.b) / 2 + ")",
      class: "course-calc__axis-label" }, g).textContent = c.y.label;
    (c.vlines || []).forEach(function (v) {
      if (!(v.x >= c.x.min && v.x <= c.x.max)) return;
      el("line", { x1: px(v.x), x2: px(v.x), y1: M.t, y2: H - M.b, class: "course-calc__vline " + (v.cls || "") }, svg);
    });
    (c.lines || []).forEach(function (line) {
      var d = line.points.filter(function (p) { return isFinite(p[1]) && p[1] >= c.y.min; }).map(function (p, i) {
        return (i ? "L" : "M") + px(Math.min(Math.max(p[0], c.x.min), c.x.max)).toFixed(1) + " " + py(Math.min(p[1], c.y.max)).toFixed(1);
      }).join(" ");
      if (d) el("path", { d: d, class: "course-calc__line " + (line.cls || "") }, svg);
    });
    (c.marks || []).forEach(function (m) {
      if (!inside(m.x, m.y)) return;
      var x = px(m.x), y = py(m.y), node;
      if (m.kind === "mine") node = el("rect", { x: x - 5, y: y - 5, width: 10, height: 10 }, svg);
      else if (m.kind === "scaled") node = el("path", { d: "M" + x + " " + (y - 7) + " L" + (x + 7) + " " + y + " L" + x + " " + (y + 7) + " L" + (x - 7) + " " + y + " Z" }, svg);
      else node = el("circle", { cx: x, cy: y, r: 5 }, svg);
      node.setAttribute("class", "course-calc__point course-calc__point--" + (m.kind || "recorded") + " " + (m.cls || ""));
      node.setAttribute("data-name", m.name || "");
      node.setAttribute("data-y", String(m.y));
      el("title", {}, node).textContent = m.title;
    });
    var legend = document.createElement("ul");
    legend.className = "course-calc__legend";
    (c.legend || []).forEach(function (item) {
      var li = document.createElement("li");
      var swatch = document.createElement("span");
      swatch.className = "course-calc__swatch course-calc__swatch--" + item.kind + " " + (item.cls || "");
      swatch.setAttribute("aria-hidden", "true");
      li.appendChild(swatch);
      li.appendChild(document.createTextNode(" " + item.label));
      legend.appendChild(li);
    });
    host.appendChild(legend);
  }
  function range(lo, hi, n, log) {
    var out = [];
    for (var i = 0; i <= n; i++) {
      out.push(log ? lo * Math.pow(hi / lo, i / n) : lo + (hi - lo) * i / n);
    }
    return out;
  }
  function topOf(values, floor) {
    var top = Math.max.apply(null, values.filter(function (v) { return isFinite(v); }).concat([floor || 0]));
    return top > 0 ? top * 1.08 : 1;
  }

  /* ---- the four calculators ---------------------------------------------------------------- */
  var GiB = UNIT.GiB;
  var gib = function (t) { var g = t / GiB; return fmt(g, Number.isInteger(Number(g.toPrecision(9))) ? 0 : 1); };
  var tokensTick = function (t) { return fmt(t, 0); };
  function sameAs(s, names) {
    return names.every(function (n) {
      return s.seeds[n] === undefined || Math.abs(s.v[n] - s.seeds[n]) < 1e-9 * Math.max(1, Math.abs(s.seeds[n]));
    });
  }
  /* The gaps are always the recorded run's: its points against the formula for its own model and
     card. When the inputs are another model or card, the line is theirs, and the text says so. */
  function ours(s, sizesOnly) {
    var model = sameAs(s, s.modelFields), card = sizesOnly || sameAs(s, s.cardFields);
    if (model && card) return "";
    var what = !model && !card ? "model and card" : !model ? "model" : "card";
    return " The points are " + s.data.model + "'s, measured on the " + s.data.gpu + "; the line is drawn for your " +
      what + ", and the gaps above are between the points and the line for theirs.";
  }

  var CALCULATORS = {};

  CALCULATORS["kv-cache"] = function (s) {
    var v = s.v;
    var cfg = { num_hidden_layers: v.num_hidden_layers, num_key_value_heads: v.num_key_value_heads, head_dim: v.head_dim,
      num_attention_heads: v.num_key_value_heads };
    var bpt = A.kvBytesPerToken(cfg, v.bytes_per_number);
    var budget = A.vllm(v.torch_total, v.gpu_memory_utilization, v.weights, v.non_torch, v.activation_peak);
    var block = s.data.values.vllm_block_size || 16;  // vLLM hands the cache out in blocks of tokens
    var outputs = { bytes_per_token: bpt, cache_bytes: bpt * v.tokens, room: budget.cache,
      tokens_fit: Math.max(0, fdiv(budget.cache, block * bpt) * block),
      conversations: A.conversations(budget.cache, bpt, v.tokens, block) };
    var dec = decodeBytes(v, s.modelType);
    outputs.weights_read = dec.read;
    outputs.decode_d0 = A.decodeBound(v.bandwidth, dec.read, dec.perToken, 0);
    outputs.decode_depth = A.decodeBound(v.bandwidth, dec.read, dec.perToken, v.tokens);
    var xmax = Math.max(v.tokens, s.data.values.context_tokens || 0) * 1.05;
    var pts = s.points("allocated");
    var y = topOf([bpt * xmax].concat(pts.map(function (p) { return p.y; })));
    var seedBpt = A.kvBytesPerToken({ num_hidden_layers: s.seeds.num_hidden_layers, head_dim: s.seeds.head_dim,
      num_key_value_heads: s.seeds.num_key_value_heads }, s.seeds.bytes_per_number);
    var gaps = s.recorded("allocated").map(function (p) {
      var formula = seedBpt * p.x, gap = p.y - formula;
      return tokens(p.x) + ": " + signed(fmt(gap, 0), gap) + " B (" + percent(gap / formula) + ")";
    });
    return {
      outputs: outputs,
      gap: "What the GPU's allocator handed out against the formula: " + gaps.join("; ") + "." + ours(s, true),
      chart: { label: "Cache size against tokens: a straight line of " + shown(bpt, "B") + " per token, with " + pts.length + " measured points",
        x: { min: 0, max: xmax, label: "tokens in one conversation", tick: tokensTick },
        y: { min: 0, max: y, unit: GiB, label: "cache (GiB)", tick: gib },
        lines: [{ cls: "course-calc__line--formula", points: [[0, 0], [xmax, bpt * xmax]] }],
        vlines: [{ x: v.tokens, cls: "course-calc__vline--input" }],
        marks: pts, legend: s.legend("the formula for your inputs") },
      gap2: decodeGap(s), chart2: decodeChart(s, v, outputs)
    };
  };
  /* the bytes bound of 2.4's step 4 for a set of inputs: weights read and cache bytes per token */
  function decodeBytes(v, modelType) {
    var cfg = { num_hidden_layers: v.num_hidden_layers, num_attention_heads: v.num_attention_heads,
      num_key_value_heads: v.num_key_value_heads, head_dim: v.head_dim, hidden_size: v.hidden_size,
      intermediate_size: v.intermediate_size, vocab_size: v.vocab_size, tie_word_embeddings: Boolean(v.tie_word_embeddings),
      model_type: modelType };
    return { read: A.shapeWeightBytesRead(A.shapeOfConfig(cfg)), perToken: A.kvBytesPerToken(cfg, v.bytes_per_number) };
  }
  function decodeGap(s) {
    var b = decodeBytes(s.seeds, s.data.model_type || "qwen3");
    var gaps = s.recorded("decode_8b").map(function (p) {
      return tokens(p.x) + " " + fmt(100 * p.y / A.decodeBound(s.seeds.bandwidth, b.read, b.perToken, p.x), 0) + "\u00a0%";
    });
    return "Measured decoding as a share of the bytes bound, " + s.data.model + ": " + gaps.join(", ") + "." + ours(s);
  }
  function decodeChart(s, v, outputs) {
    var b = decodeBytes(v, s.modelType), xmax = Math.max(v.tokens, 32768) * 1.05;
    // the recorded depths are points of the line, so it passes through the bound at each
    var depths = range(0, xmax, 40, false).concat(s.recorded("decode_8b").map(function (p) { return p.x; }));
    depths.sort(function (a, b) { return a - b; });
    var line = depths.map(function (d) { return [d, A.decodeBound(v.bandwidth, b.read, b.perToken, d)]; });
    var pts = s.points("decode_8b").concat(s.points("decode_06b").map(function (p) { p.cls = "course-calc__s1"; return p; }));
    var top = topOf([outputs.decode_d0].concat(pts.map(function (p) { return p.y; })));
    return { label: "Decoding speed against tokens cached: the bytes bound falls from " + shown(outputs.decode_d0, "tok/s") +
        " with an empty cache, with " + pts.length + " measured points",
      x: { min: 0, max: xmax, label: "tokens already cached (depth)", tick: tokensTick },
      y: { min: 0, max: top, label: "tokens a second", tick: function (t) { return fmt(t, 0); } },
      lines: [{ cls: "course-calc__line--formula", points: line }],
      vlines: [{ x: v.tokens, cls: "course-calc__vline--input" }], marks: pts,
      legend: s.legend("the bytes bound for your inputs", [{ kind: "recorded", cls: "course-calc__s1", label: "Qwen3-0.6B, measured in the lab (under its own bound, far higher: its weights are small)" }]) };
  }

  /* transformers' budget (a function of the share, by the planner of the release chosen) and
     vLLM's, for a set of inputs */
  function budgets(v, modelType) {
    var cfg = { num_hidden_layers: v.num_hidden_layers, num_attention_heads: v.num_attention_heads,
      num_key_value_heads: v.num_key_value_heads, head_dim: v.head_dim, hidden_size: v.hidden_size,
      intermediate_size: v.intermediate_size, vocab_size: v.vocab_size, tie_word_embeddings: Boolean(v.tie_word_embeddings),
      model_type: modelType };
    var weights = A.weightBytes(cfg);
    var eng = P.engine({ block_size: v.block_size, cache_bytes: v.bytes_per_number, release: v.release });
    return { cfg: cfg, weights: weights, bpt: A.kvBytesPerToken(cfg, v.bytes_per_number),
      tf: function (share) { return P.budget(cfg, v.torch_total, v.cuda_context, weights, share, eng, { x: v.tokens }); },
      vl: function (share) { return A.vllm(v.torch_total, share, weights, v.non_torch, v.activation_peak); } };
  }
  CALCULATORS["gpu-memory"] = function (s) {
    var v = s.v, b = budgets(v, s.modelType), seeded = budgets(s.seeds, s.data.model_type || "qwen3");
    var weights = b.weights, bpt = b.bpt, tf = b.tf, vl = b.vl;
    var t = tf(v.max_memory_percent), vv = vl(v.gpu_memory_utilization);
    var free = v.torch_total - v.cuda_context - weights;
    var vllmBlock = s.data.values.vllm_block_size || 16;
    var outputs = {
      weights: weights, free: free,
      batch_tokens: t.plan ? t.plan.max_batch_tokens : null, blocks: t.plan ? t.plan.num_blocks : 0,
      cache_transformers: t.plan ? t.plan.lines.cache : 0, cache_tokens_transformers: t.cache_tokens,
      conversations_transformers: t.conversations.x,
      cache_vllm: Math.max(vv.cache, 0), cache_tokens_vllm: Math.max(0, fdiv(vv.cache, bpt)),
      conversations_vllm: A.conversations(vv.cache, bpt, v.tokens, vllmBlock),
      cache_llama_cpp: Math.max(free, 0), cache_tokens_llama_cpp: Math.max(0, fdiv(free, bpt)),
      conversations_llama_cpp: Math.max(0, fdiv(Math.max(0, fdiv(free, bpt)), v.tokens))
    };
    var shares = range(0.05, 1, 95);
    var pts = s.points("engine");
    var tfLine = shares.map(function (f) { return [f, tf(f).cache_tokens]; });
    var vlLine = shares.map(function (f) { return [f, Math.max(0, fdiv(vl(f).cache, bpt))]; });
    var top = topOf(tfLine.concat(vlLine).map(function (p) { return p[1]; }).concat(pts.map(function (p) { return p.y; })));
    var gaps = s.recorded("engine").map(function (p) {
      var formula = seeded.tf(p.x).cache_tokens, gap = p.y - formula;
      return "at " + fmt(p.x, 1) + " the engine kept " + tokens(p.y) + ", the formula " + fmt(formula, 0) +
        " (" + signed(fmt(gap, 0), gap) + ", " + (formula ? percent(gap / formula) : "–") + ")";
    });
    var problem = t.plan ? "" : " transformers' planner finds no room: " + t.problem + ".";
    // the gaps are the recorded run's, by its own release's planner, whichever the line follows
    var release = v.release && s.seeds.release && v.release !== s.seeds.release ? " The line follows the " +
      v.release + " planner; the engine's points, and the gaps above, are of the " + s.seeds.release + " one." : "";
    return {
      outputs: outputs,
      gap: "transformers' cache on paper against the engine's own" + (s.seeds.release ? ", by the " + s.seeds.release +
        " planner" : "") + ", " + gaps.join("; ") + "." + problem + release + ours(s),
      chart: { label: "Tokens of cache against the memory fraction under transformers' rule and vLLM's, with " + pts.length + " measured points",
        x: { min: 0, max: 1, label: "memory fraction (max_memory_percent, gpu_memory_utilization)", tick: function (x) { return fmt(x, 1); } },
        y: { min: 0, max: top, unit: 1000, label: "tokens of KV cache (thousands)", tick: function (x) { return fmt(x / 1000, 0); } },
        lines: [{ cls: "course-calc__line--formula", points: tfLine }, { cls: "course-calc__line--other", points: vlLine }],
        vlines: [{ x: v.max_memory_percent, cls: "course-calc__vline--input" }],
        marks: pts,
        legend: s.legend("transformers: a share of what is free after the weights", [{ kind: "line", cls: "course-calc__line--other", label: "vLLM: a share of the whole card" }]) }
    };
  };

  var DESIGN_KEYS = ["mha", "gqa", "mqa", "mla", "sliding", "gqa_fp8"];
  CALCULATORS["smaller-cache"] = function (s) {
    var v = s.v;
    var base = A.shape({ layers: v.num_hidden_layers, hidden: v.hidden_size, heads: v.num_attention_heads,
      head_dim: v.head_dim, intermediate: v.intermediate_size, vocab: v.vocab_size, tied: v.tie_word_embeddings });
    var designs = A.designs(base, v.num_key_value_heads, v.kv_lora_rank, v.qk_rope_head_dim, v.sliding_window || null);
    designs.gqa_fp8 = designs.gqa;
    var outputs = {}, lines = [], marks = [], xmax = Math.max(v.tokens, 32768) * 1.05, tops = [];
    DESIGN_KEYS.forEach(function (key, i) {
      var shape = designs[key], format = key === "gqa_fp8" ? "fp8" : "bf16";
      var cache = A.cacheBytes(shape, v.tokens, format), weights = A.shapeWeightBytes(shape);
      var act = s.data.values["activation_" + (key === "gqa_fp8" ? "gqa" : key)];
      var room = A.vllm(v.torch_total, v.gpu_memory_utilization, weights, v.non_torch, act).cache;
      outputs["bytes_per_token_" + key] = A.bytesPerToken(shape, format);
      outputs["cache_" + key] = cache;
      outputs["weights_" + key] = weights;
      outputs["conversations_" + key] = fdiv(Math.max(room, 0), cache);
      var xs = range(0, xmax, 40, false);
      if (shape.window) xs.push(shape.window);
      xs.sort(function (a, b) { return a - b; });
      var pts = xs.map(function (x) { return [x, A.cacheBytes(shape, x, format)]; });
      tops.push(pts[pts.length - 1][1]);
      lines.push({ cls: "course-calc__s" + i, points: pts });
      s.points(key).forEach(function (p) { p.cls = "course-calc__s" + i; marks.push(p); });
    });
    var w = s.seeds, seedDesigns = A.designs(A.shape({ layers: w.num_hidden_layers, hidden: w.hidden_size,
      heads: w.num_attention_heads, head_dim: w.head_dim, intermediate: w.intermediate_size, vocab: w.vocab_size,
      tied: Boolean(w.tie_word_embeddings) }), w.num_key_value_heads, w.kv_lora_rank, w.qk_rope_head_dim, w.sliding_window || null);
    seedDesigns.gqa_fp8 = seedDesigns.gqa;
    var gaps = DESIGN_KEYS.map(function (key) {
      var p = s.recorded(key)[0];
      if (!p) return null;
      var shape = seedDesigns[key], formula = A.cacheBytes(shape, p.x, key === "gqa_fp8" ? "fp8" : "bf16");
      return s.label(key) + " " + signed(fmt(p.y - formula, 0), p.y - formula) + " B";
    }).filter(Boolean);
    return {
      outputs: outputs,
      gap: "What the GPU's allocator handed out for " + fmt(32768, 0) + " tokens, against the formula: " + gaps.join(", ") + "." +
        ours(s, true),
      chart: { label: "Cache size against tokens for six designs, with the measured cache of each at 32,768 tokens",
        x: { min: 0, max: xmax, label: "tokens in one conversation", tick: tokensTick },
        y: { min: 0, max: topOf(tops.concat(marks.map(function (m) { return m.y; }))), unit: GiB, label: "cache (GiB)", tick: gib },
        lines: lines, vlines: [{ x: v.tokens, cls: "course-calc__vline--input" }], marks: marks,
        legend: DESIGN_KEYS.map(function (key, i) { return { kind: "line", cls: "course-calc__s" + i, label: s.label(key) }; })
          .concat(s.legend(null)) }
    };
  };

  CALCULATORS["prefill-decode"] = function (s) {
    var v = s.v;
    var cfg = function (x) {
      return { hidden_size: x.hidden_size, num_attention_heads: x.num_attention_heads, num_key_value_heads: x.num_key_value_heads,
        head_dim: x.head_dim, intermediate_size: x.intermediate_size };
    };
    var shapes = R.fusedProducts(cfg(v)), seedShapes = R.fusedProducts(cfg(s.seeds));
    var at = function (t) { return R.time(R.flops(t, shapes), R.moved(t, shapes), v.bf16_flops, v.bandwidth); };
    var now = at(v.tokens), ridge = v.bf16_flops / v.bandwidth;
    var outputs = { time: now[0], bound: now[1] === "memory" ? "memory (bandwidth)" : "arithmetic (the peak)",
      tflop_s: R.flops(v.tokens, shapes) / now[0], ridge: ridge, ridge_tokens: R.tokensForIntensity(ridge, shapes) };
    // a recorded TFLOP/s, as the time of the lab's own layer at that many tokens
    var asTime = function (p) { p.y = R.flops(p.x, seedShapes) / (p.y * 1e12); return p; };
    var pts = s.points("measured").map(asTime);
    var xs = range(1, 8192, 52, true), line = xs.map(function (t) { return [t, at(t)[0]]; });
    var ys = line.map(function (p) { return p[1]; }).concat(pts.map(function (p) { return p.y; }));
    var lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys);
    var atSeed = function (t) { return R.time(R.flops(t, seedShapes), R.moved(t, seedShapes), s.seeds.bf16_flops, s.seeds.bandwidth); };
    var gaps = s.recorded("measured").map(asTime).filter(function (p) { return p.x === 1 || p.x === 256 || p.x === 8192; })
      .map(function (p) { var f = atSeed(p.x)[0]; return tokens(p.x) + " " + percent(p.y / f - 1); });
    var measuredRidge = s.data.values.ridge_tokens_measured;
    return {
      outputs: outputs,
      gap: "Measured time against the roofline of the bandwidth and peak measured with it: " + gaps.join(", ") +
        ". The ridge is at " + fmt(outputs.ridge_tokens, 0) + " tokens at once for your inputs, and was measured at " +
        fmt(measuredRidge, 0) + "." + ours(s),
      chart: { label: "Time of one layer's matrix products against tokens multiplied at once, on log scales, with " + pts.length + " measured points",
        x: { min: 1, max: 8192, log: true, base: 2, every: 2, label: "tokens multiplied at once", tick: tokensTick },
        y: { min: Math.pow(10, Math.floor(Math.log10(lo))), max: Math.pow(10, Math.ceil(Math.log10(hi))), log: true,
          label: "time (µs)", tick: function (t) { return fmt(t * 1e6, t < 1e-6 ? 1 : 0); } },
        lines: [{ cls: "course-calc__line--formula", points: line }],
        vlines: [{ x: outputs.ridge_tokens, cls: "course-calc__vline--formula" }, { x: measuredRidge, cls: "course-calc__vline--measured" },
          { x: v.tokens, cls: "course-calc__vline--input" }],
        marks: pts,
        legend: s.legend("the roofline for your inputs", [
          { kind: "vline", cls: "course-calc__vline--formula", label: "its ridge" },
          { kind: "vline", cls: "course-calc__vline--measured", label: "the measured ridge" }]) }
    };
  };

  /* ---- the form ----------------------------------------------------------------------------- */
  var LABELS = { mha: "multi-head", gqa: "grouped-query", mqa: "multi-query", mla: "latent", sliding: "sliding window",
    gqa_fp8: "grouped-query, 8 bits" };

  function mount(form) {
    if (!form || form.getAttribute("data-calc-state") === "ready") return;
    var data;
    try { data = JSON.parse(form.getAttribute("data-numbers")); } catch (e) { data = null; }
    var compute = data && CALCULATORS[data.calculator];
    if (!data || data.version !== VERSION || !compute) {
      form.setAttribute("data-calc-state", "failed");
      return;
    }
    var inputs = {};
    Array.prototype.forEach.call(form.querySelectorAll("input[name], select[name]"), function (node) {
      if (node.type !== "file") inputs[node.name] = node;
    });
    var numeric = Object.keys(inputs).filter(function (n) { return n !== "card" && inputs[n].type === "number"; });
    var checks = Object.keys(inputs).filter(function (n) { return inputs[n].type === "checkbox"; });
    // fields of choices besides the card (whose planner: `release`), read as their value
    var choices = Object.keys(inputs).filter(function (n) { return n !== "card" && inputs[n].tagName === "SELECT"; });
    var cardFields = numeric.filter(function (n) { return inputs[n].closest(".course-calc__group--card"); });
    var state = { data: data, seeds: data.seeds, modelType: data.model_type || "qwen3", mine: null,
      modelFields: numeric.filter(function (n) { return n !== "tokens" && inputs[n].closest(".course-calc__group--model"); }) };
    state.cardFields = numeric.filter(function (n) { return inputs[n].closest(".course-calc__group--card"); });
    var gapLine = form.querySelector("[data-gap]"), plot = form.querySelector("[data-chart]");
    var gap2 = form.querySelector("[data-gap2]"), plot2 = form.querySelector("[data-chart2]");
    var status = form.querySelector(".course-calc__group--model .course-calc__status");
    var mineLine = form.querySelector("[data-mine]");
    var cards = {};
    data.cards.forEach(function (c) { cards[c.key] = c; });

    function read() {
      var v = {}, bad = [];
      numeric.forEach(function (name) {
        var node = inputs[name];
        var exact = node.value === node.getAttribute("data-seed") && node.hasAttribute("data-exact");
        var number = exact ? Number(node.getAttribute("data-exact")) : Number(node.value) * (UNIT[node.getAttribute("data-unit")] || 1);
        var ok = node.value !== "" && isFinite(number) && number >= Number(node.min || 0);
        node.setAttribute("aria-invalid", ok ? "false" : "true");
        if (!ok) bad.push(node.labels && node.labels[0] ? node.labels[0].textContent : name);
        v[name] = number;
      });
      checks.forEach(function (name) { v[name] = inputs[name].checked; });
      choices.forEach(function (name) { v[name] = inputs[name].value; });
      return { v: v, bad: bad };
    }
    function setNumber(name, base, exact) {
      var node = inputs[name];
      if (!node) return;
      var unit = UNIT[node.getAttribute("data-unit")] || 1;
      node.value = (base / unit).toFixed(Number(node.getAttribute("data-decimals") || 0));
      node.setAttribute("data-seed", node.value);
      if (exact) node.setAttribute("data-exact", String(base));
      else node.removeAttribute("data-exact");
      node.setAttribute("aria-invalid", "false");
    }
    function chooseCard(key) {
      var card = cards[key];
      if (!card) return;
      inputs.card.value = key;
      cardFields.forEach(function (name) { if (card.figures[name] !== undefined) setNumber(name, card.figures[name], true); });
    }
    state.points = function (series) {
      var out = [];
      data.points.forEach(function (p) {
        if (p.series !== series) return;
        out.push({ x: p.x, y: p.y, name: p.name, kind: "recorded", title: "Measured in the lab: " + p.label });
        var row = state.mine && state.mine[p.name];
        if (!row) return;
        if (typeof row.expected === "number" && row.kind !== "exact" && row.expected !== row.page) {
          out.push({ x: p.x, y: row.expected, name: p.name, kind: "scaled", title: "Ours, scaled to your card: " + p.label });
        }
        if (typeof row.theirs === "number") {
          out.push({ x: p.x, y: row.theirs, name: p.name, kind: "mine", title: "Your run: " + p.label + (row.verdict ? " (" + row.verdict + ")" : "") });
        }
      });
      return out;
    };
    state.recorded = function (series) { return state.points(series).filter(function (p) { return p.kind === "recorded"; }); };
    state.label = function (key) { return LABELS[key] || key; };
    state.legend = function (line, extra) {
      var items = line ? [{ kind: "line", cls: "course-calc__line--formula", label: line }] : [];
      items = items.concat(extra || []);
      items.push({ kind: "recorded", label: "measured in the lab (" + data.model + ", " + data.gpu + ")" });
      if (state.mine) {
        items.push({ kind: "scaled", label: "ours, scaled to your card as compare.py scales them" });
        items.push({ kind: "mine", label: "your run" });
      }
      return items;
    };

    /* how far the learner's values are from ours on their card, as compare.py judged them */
    function mineGap() {
      if (!state.mine) return "";
      var said = data.points.map(function (p) {
        var row = state.mine[p.name];
        if (!row || typeof row.theirs !== "number") return null;
        var verdict = row.verdict || "not judged";
        return p.label + ": " + (typeof row.off === "number" ? percent(row.off) + ", " + verdict : verdict);
      }).filter(Boolean);
      return said.length ? " Your run against ours on your card: " + said.join("; ") + "." : "";
    }

    var pending = false;
    function update() {
      pending = false;
      var got = read();
      if (got.bad.length) {
        gapLine.textContent = "Give a number for: " + got.bad.join(", ") + ".";
        return;
      }
      state.v = got.v;
      var result = compute(state);
      Object.keys(result.outputs).forEach(function (name) {
        var out = form.querySelector("output[name='" + name + "']");
        if (!out) return;
        var value = result.outputs[name];
        out.textContent = shown(value, out.getAttribute("data-unit"));
        out.setAttribute("data-value", typeof value === "number" ? String(value) : value);
      });
      gapLine.textContent = result.gap + mineGap();
      draw(plot, result.chart);
      if (result.chart2 && plot2) { gap2.textContent = result.gap2; draw(plot2, result.chart2); }
    }
    function later() { if (!pending) { pending = true; window.requestAnimationFrame(update); } }

    function readConfig() {
      var text = form.querySelector("textarea[name=config_json]").value.trim();
      if (!text) { status.textContent = "Paste a config.json first."; return; }
      var raw;
      try { raw = JSON.parse(text); } catch (e) { status.textContent = "That is not JSON: " + e.message; return; }
      if (!raw || typeof raw !== "object" || Array.isArray(raw)) { status.textContent = "A config.json is one JSON object."; return; }
      var cfg = A.languageFields(raw);
      if (!cfg.num_hidden_layers) { status.textContent = "It has no num_hidden_layers: is it a model's config.json?"; return; }
      var read = [], notes = [];
      var put = function (name, value, note) {
        if (!inputs[name] || value === undefined || value === null || value === "") return;
        if (inputs[name].type === "checkbox") inputs[name].checked = Boolean(value);
        else setNumber(name, Number(value), false);
        read.push(name + " " + (typeof value === "boolean" ? value : fmt(Number(value), 0)) + (note ? " (" + note + ")" : ""));
      };
      ["num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size", "kv_lora_rank",
        "qk_rope_head_dim"].forEach(function (n) { put(n, cfg[n]); });
      put("num_key_value_heads", A.kvHeads(cfg), cfg.num_key_value_heads ? "" : "none given: one per query head");
      put("head_dim", A.headSize(cfg), cfg.head_dim ? "" : "hidden_size ÷ num_attention_heads");
      if (inputs.tie_word_embeddings) put("tie_word_embeddings", Boolean(cfg.tie_word_embeddings));
      var nb = A.numberBytes(cfg);
      put("bytes_per_number", nb[0], nb[1] ? "torch_dtype " + nb[1] : "no dtype named: bf16");
      if (cfg.sliding_window && inputs.sliding_window) put("sliding_window", cfg.sliding_window);
      if (cfg.model_type) state.modelType = String(cfg.model_type);
      if (A.isLatent(cfg) && !inputs.kv_lora_rank) notes.push("it uses latent attention (MLA): its cache is layers × (kv_lora_rank + qk_rope_head_dim) numbers a token, which this form does not count");
      if ((cfg.layer_types || []).some(function (t) { return t !== "full_attention"; })) notes.push("some of its layers use a sliding window, which this form counts as full attention");
      status.textContent = "Read from config.json: " + read.join(", ") + "." + (notes.length ? " Note: " + notes.join("; ") + "." : "");
      later();
    }

    function loadCompare(text) {
      var got;
      try { got = JSON.parse(text); } catch (e) { mineLine.textContent = "That is not JSON: " + e.message; return; }
      if (!got || got.kind !== "course-compare" || !Array.isArray(got.values)) {
        mineLine.textContent = "That is not the JSON compare.py writes (python3 compare.py --json mine.json).";
        return;
      }
      if (got.lesson !== data.lesson) {
        mineLine.textContent = "That file compares a run of lesson " + got.lesson + "; this page is " + data.lesson +
          ": run compare.py in this lesson's lab folder.";
        return;
      }
      var rows = {};
      got.values.forEach(function (row) { rows[row.name] = row; });
      state.mine = rows;
      var plotted = data.points.filter(function (p) { return rows[p.name] && typeof rows[p.name].theirs === "number"; });
      var differ = plotted.filter(function (p) { return rows[p.name].verdict === "differs"; });
      var gpu = got.gpu && got.gpu.name ? got.gpu.name : "a machine without a GPU named";
      var mineCard = got.gpu && got.gpu.name ? findCard(got.gpu.name) : null;
      var said = "Plotted " + plotted.length + " of your values from a run on " + gpu + " (" + differ.length +
        " of them far from what we expect on your card).";
      if (mineCard && mineCard.key !== inputs.card.value) {
        chooseCard(mineCard.key);
        said += " Your card, " + mineCard.label + ", is chosen above, so the line is drawn for it.";
      }
      mineLine.textContent = said;
      later();
    }
    function findCard(name) {
      var upper = name.toUpperCase();
      return data.cards.filter(function (c) {
        return c.match && c.match.every(function (w) { return upper.indexOf(w) >= 0; }) &&
          !c.avoid.some(function (w) { return upper.indexOf(w) >= 0; });
      })[0] || null;
    }

    form.addEventListener("input", function (event) {
      var target = event.target;
      if (cardFields.indexOf(target.name) >= 0) inputs.card.value = "own";
      if (target.name && inputs[target.name]) later();
    });
    form.addEventListener("change", function (event) {
      if (event.target.name === "card") { chooseCard(event.target.value); later(); }
      if (event.target.name === "compare_file" && event.target.files && event.target.files[0]) {
        var reader = new FileReader();
        reader.onload = function () { loadCompare(String(reader.result)); };
        reader.readAsText(event.target.files[0]);
      }
    });
    form.querySelector("textarea[name=config_json]").addEventListener("paste", function () { window.setTimeout(readConfig, 0); });
    form.addEventListener("click", function (event) {
      var action = event.target.getAttribute && event.target.getAttribute("data-action");
      if (action === "read-config") readConfig();
      if (action === "read-compare") loadCompare(form.querySelector("textarea[name=compare_json]").value);
      if (action === "reset") {
        numeric.forEach(function (name) { setNumber(name, data.seeds[name], true); });
        checks.forEach(function (name) { inputs[name].checked = Boolean(data.seeds[name]); });
        choices.forEach(function (name) { inputs[name].value = data.seeds[name]; });
        chooseCard(data.card);
        state.modelType = data.model_type || "qwen3";
        state.mine = null;
        status.textContent = ""; mineLine.textContent = "";
        later();
      }
    });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    form.setAttribute("data-calc-state", "ready");
    update();
  }

  window.CourseCalculator = { version: VERSION, arith: A, mount: mount, shown: shown };
})();
