// Imported first (`NODE_OPTIONS=--import=file:///…/skew.mjs`) by a process the fuzzer starts with a
// skewed clock: Date.now() and new Date() run FUZZ_CLOCK_SKEW_MS ahead (or behind, when negative) of
// the machine's, as on a host whose NTP drifted. Timers and performance.now() are left alone.
// Date stays the same class (a Proxy of it, whose only trap is `new Date()` without arguments): code
// that compares a type with Date (mongoose's schemas) or calls Date.UTC/parse sees no difference.
const skewMs = Number(process.env.FUZZ_CLOCK_SKEW_MS ?? 0);
if (skewMs) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  RealDate.now = () => realNow() + skewMs;
  globalThis.Date = new Proxy(RealDate, {
    construct(target, args, newTarget) {
      return Reflect.construct(target, args.length === 0 ? [realNow() + skewMs] : args, newTarget === globalThis.Date ? target : newTarget);
    },
    apply() {
      // Date() called as a function returns the current time as a string
      return new RealDate(realNow() + skewMs).toString();
    },
  });
}
