import type { Writable } from "node:stream";
import { formatBytes } from "./output.js";

type Out = Writable & { isTTY?: boolean };

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface Spinner {
  /** New status text (TTY: redrawn in place; otherwise one dot per call). */
  update(text: string): void;
  stop(): void;
}

/** Progress while waiting: a spinner with elapsed time on a TTY, dots otherwise. */
export function spinner(err: Out, label: string): Spinner {
  const started = Date.now();
  if (!err.isTTY) {
    err.write(`${label}`);
    return {
      update: () => err.write("."),
      stop: () => err.write("\n"),
    };
  }
  let text = "";
  let frame = 0;
  const draw = () => {
    const secs = ((Date.now() - started) / 1000).toFixed(1);
    err.write(`\r\x1b[2K${FRAMES[frame++ % FRAMES.length]} ${label} ${text} ${secs}s`);
  };
  const timer = setInterval(draw, 100);
  draw();
  return {
    update: (t) => {
      text = t;
    },
    stop: () => {
      clearInterval(timer);
      err.write("\r\x1b[2K");
    },
  };
}

/** Runs `work` with a spinner labelled `label` on `err`, stopped however the work ends. */
export async function withSpinner<T>(err: Out, label: string, work: (spin: Spinner) => Promise<T>): Promise<T> {
  const spin = spinner(err, label);
  try {
    return await work(spin);
  } finally {
    spin.stop();
  }
}

export interface ByteProgress {
  onProgress: (bytes: number, total: number | undefined) => void;
  done(): void;
}

/** Bytes moved, on one line redrawn at most 10 times a second; silent when stderr is not a TTY. */
export function byteProgress(err: Out, label: string): ByteProgress {
  if (!err.isTTY) return { onProgress: () => {}, done: () => {} };
  const started = Date.now();
  let last = 0;
  let shown = false;
  let latest = { bytes: 0, total: undefined as number | undefined };
  const draw = () => {
    const secs = Math.max(0.001, (Date.now() - started) / 1000);
    const { bytes, total } = latest;
    const pct = total ? ` (${Math.floor((bytes / total) * 100)}%)` : "";
    const of = total !== undefined ? ` / ${formatBytes(total)}` : "";
    err.write(`\r\x1b[2K${label} ${formatBytes(bytes)}${of}${pct} ${formatBytes(bytes / secs)}/s`);
    shown = true;
  };
  return {
    onProgress: (bytes, total) => {
      latest = { bytes, total };
      const now = Date.now();
      if (now - last >= 100) {
        last = now;
        draw();
      }
    },
    done: () => {
      if (shown) {
        draw();
        err.write("\n");
      }
    },
  };
}
