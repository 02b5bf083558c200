// Imported first (`NODE_OPTIONS=--import=file:///…/skew.mjs`) by a process the fuzzer starts with a
// skewed clock: Date.now() and new Date() run FUZZ_CLOCK_SKEW_MS ahead (or behind, when negative) of
// the machine's, as on a host whose NTP drifted. Timers and performance.now() are left alone.
const skewMs = Number(process.env.FUZZ_CLOCK_SKEW_MS ?? 0);
if (skewMs) {
  const RealDate = Date;
  const realNow = RealDate.now;
  class SkewedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(realNow() + skewMs);
      else super(...args);
    }
    static now() {
      return realNow() + skewMs;
    }
  }
  globalThis.Date = SkewedDate;
}
