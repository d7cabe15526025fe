"""The JavaScript every sandbox isolate runs before any code (sandbox.py): the event's time for a clock, no
randomness, no timers, no weak references, no RegExp legacy statics, every reachable intrinsic frozen; and the
runner that compiles a handler's code as a function body of its own and checks what it returns."""

PRELUDE = r"""
(() => {
  "use strict";
  const RealDate = Date;
  let clock = 0;
  function HeraldDate(...args) {
    if (!new.target) return new RealDate(clock).toString();
    return Reflect.construct(RealDate, args.length ? args : [clock], new.target);
  }
  HeraldDate.prototype = RealDate.prototype;
  Object.defineProperty(RealDate.prototype, "constructor", {value: HeraldDate});
  HeraldDate.now = () => clock;
  HeraldDate.parse = RealDate.parse;
  HeraldDate.UTC = RealDate.UTC;
  globalThis.Date = HeraldDate;
  Math.random = function random() {
    throw new Error("Math.random is not available in a transformation: its output must be the same on every try");
  };
  // Formatting a date without one formats the event's time, not the host's clock.
  const DTF = Intl.DateTimeFormat.prototype;
  const formatOf = Reflect.getOwnPropertyDescriptor(DTF, "format").get;
  Object.defineProperty(DTF, "format", {
    get() { const f = formatOf.call(this); return (d) => f(d === undefined ? clock : d); }});
  const formatToParts = DTF.formatToParts;
  DTF.formatToParts = function (d) { return formatToParts.call(this, d === undefined ? clock : d); };
  delete Atomics.waitAsync;
  delete Atomics.wait;
  for (const name of ["WeakRef", "FinalizationRegistry", "SharedArrayBuffer", "WebAssembly", "Temporal"]) {
    delete globalThis[name];
  }
  delete RealDate.prototype.toTemporalInstant;  // (the way to Temporal's constructors that the global's removal left)
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    if (name in globalThis) globalThis[name] = undefined;
  }
  // RegExp's legacy statics hold the last match of any call: another call's payload, and output that differs.
  for (const name of ["$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9", "input", "$_", "lastMatch", "$&",
                      "lastParen", "$+", "leftContext", "$`", "rightContext", "$'"]) {
    delete RegExp[name];
  }
  const parse = JSON.parse, stringify = JSON.stringify, Fn = Function;
  const isPromise = (value) => value instanceof Promise;
  // The code's body, in a function of its own: it cannot close the function early (a body is parsed alone), and
  // the names mini-racer leaves in the global scope are shadowed.
  const OPEN = '"use strict"; const __TimerManager = undefined, __timer_manager = undefined;';
  const CLOSE = '\n;return typeof handler === "function" ? handler : null;\n//# sourceURL=handler.js';
  const MAX_DEPTH = 64;
  function depth(value) {
    let deepest = 0;
    const stack = [[value, 1]];
    while (stack.length) {
      const [item, level] = stack.pop();
      if (item === null || typeof item !== "object") continue;
      if (level > MAX_DEPTH) return level;
      deepest = Math.max(deepest, level);
      for (const key of Object.keys(item)) stack.push([item[key], level + 1]);
    }
    return deepest;
  }
  // mini-racer's script-level class binding is writable from any code (not a property of the frozen global): it is
  // emptied before every call, so nothing a call leaves there is seen by the next.
  const reset = typeof __TimerManager === "undefined" ? () => {} : () => { __TimerManager = undefined; };
  function run(code, input, now, maxOutput) {
    reset();
    clock = now;
    const handler = new Fn(OPEN + code + CLOSE)();
    if (typeof handler !== "function") throw new TypeError("the code defines no function handler(webhook)");
    const webhook = parse(input);
    const url = webhook.url;
    let out = handler(webhook);
    if (out === undefined) out = webhook;
    if (isPromise(out)) throw new TypeError("handler(webhook) returned a Promise: it must return the webhook itself");
    if (out === null || typeof out !== "object") throw new TypeError("handler(webhook) must return the webhook");
    if (out.url !== url) throw new TypeError("a transformation cannot change the URL: the endpoint that " +
                                             "confirmed the subscription is the one that receives");
    const text = stringify({payload: out.payload, method: out.method, cancel: out.cancel});
    if (text.length > maxOutput) throw new RangeError("the webhook returned is larger than " + maxOutput + " bytes");
    if (depth(parse(text)) > MAX_DEPTH) throw new RangeError("the webhook returned is nested deeper than " + MAX_DEPTH);
    return text;
  }
  function compiles(code) {
    reset();
    clock = 0;
    if (typeof new Fn(OPEN + code + CLOSE)() !== "function") {
      throw new TypeError("the code defines no function handler(webhook)");
    }
    return true;
  }
  Object.defineProperty(globalThis, "__herald_run", {value: run});
  Object.defineProperty(globalThis, "__herald_compiles", {value: compiles});
  const seen = new Set();
  const freeze = (o) => {
    if (o === null || (typeof o !== "object" && typeof o !== "function") || seen.has(o)) return;
    seen.add(o);
    Object.freeze(o);
    for (const key of Reflect.ownKeys(o)) {
      const d = Reflect.getOwnPropertyDescriptor(o, key);
      if ("value" in d) freeze(d.value); else { freeze(d.get); freeze(d.set); }
    }
    freeze(Reflect.getPrototypeOf(o));
  };
  freeze(globalThis);
  if (typeof __TimerManager !== "undefined") { freeze(__TimerManager); reset(); }
  // Intrinsics no global names: generators', async functions', iterators' (helpers' and wrappers' too), typed
  // arrays', segmenters', and the accessor every error's stack shares.
  const segments = new Intl.Segmenter().segment("x");
  for (const o of [function* () {}, async function () {}, async function* () {}, [][Symbol.iterator](),
                   new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), ""[Symbol.iterator](),
                   "x".matchAll(/x/g), Int8Array, (function* () {})(), [].values().map((x) => x),
                   Iterator.from({next() { return {done: true}; }}), segments, segments[Symbol.iterator](),
                   (async function* () {})()]) {
    freeze(o);
    freeze(Reflect.getPrototypeOf(o));
  }
  const stack = Reflect.getOwnPropertyDescriptor(new Error("x"), "stack");
  if (stack) { freeze(stack.get); freeze(stack.set); }
})();
//# sourceURL=herald-prelude.js
"""
