/**
 * Fingerprints of the keys every server on one database must share (table `key_fingerprints`):
 * the first server to start records each; later ones compare theirs. Only HMACs of a constant
 * are stored, never the keys.
 */
export interface KeyFingerprints {
  /** Records `fingerprint` under `name` unless one is recorded; answers the recorded one. */
  claim(name: string, fingerprint: string): Promise<string>;
}

export const KEY_FINGERPRINTS_MIGRATION = `
  CREATE TABLE key_fingerprints (name TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, recorded_at TEXT NOT NULL);`;
