/**
 * Counts one more holder of `key` in `counts`. The returned release counts it off again (the key
 * goes at zero) and answers true; called again, it does nothing and answers false.
 */
export function countHolder<K>(counts: Map<K, number>, key: K): () => boolean {
  counts.set(key, (counts.get(key) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return false;
    released = true;
    const n = (counts.get(key) ?? 1) - 1;
    if (n > 0) counts.set(key, n);
    else counts.delete(key);
    return true;
  };
}
