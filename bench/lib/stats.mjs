// Percentiles and the summary every latency figure of the benches prints.

/** The p-th percentile of `xs` (nearest rank, as every bench here has always computed it). */
export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** `{n, p50_ms, p99_ms, min_ms}` of durations in milliseconds. */
export const stats = (xs) => ({
  n: xs.length,
  p50_ms: +pct(xs, 50).toFixed(3),
  p99_ms: +pct(xs, 99).toFixed(3),
  min_ms: +Math.min(...xs).toFixed(3),
});

/** The median of `xs` (the upper one of an even count), to 0.1. */
export const median = (xs) => +[...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(1);

/** How long `fn` took, in milliseconds. */
export const time = async (fn) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};
