// Constants of the guest wire protocol (docs/protocol.md), shared by host and tests.
export const FRAME_MAGIC = 0x5354;
export const FRAME_HEADER_BYTES = 12;
export const FRAME_MAX_PAYLOAD = 1024 * 1024;
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;

export const FrameType = {
  HELLO: 0x01,
  HELLO_ACK: 0x02,
  READY: 0x03,
  PING: 0x04,
  PONG: 0x05,
  SHUTDOWN: 0x06,
  SYNC: 0x07,
  EXEC: 0x10,
  STDIN: 0x11,
  STDIN_CLOSE: 0x12,
  SIGNAL: 0x13,
  WINDOW: 0x14,
  RESIZE: 0x15,
  FILE_WRITE: 0x20,
  DATA: 0x21,
  END: 0x22,
  FILE_READ: 0x23,
  STAT: 0x24,
  LIST: 0x25,
  MKDIR: 0x26,
  REMOVE: 0x27,
  CANCEL: 0x28,
  FSFREEZE: 0x29,
  FSTHAW: 0x2a,
  RESULT: 0x30,
  ERROR: 0x31,
  STDOUT: 0x40,
  STDERR: 0x41,
  STARTED: 0x42,
  EXIT: 0x43,
} as const;

export const Tag = {
  ARG: 1,
  ENV: 2,
  CWD: 3,
  USER: 4,
  TIMEOUT_MS: 5,
  SHELL: 6,
  PATH: 7,
  OFFSET: 8,
  LENGTH: 9,
  MODE: 10,
  FLAGS: 11,
  SIGNUM: 12,
  TIME_NS: 13,
  ENTROPY: 14,
  ROWS: 15,
  COLS: 16,
  /** HELLO/SYNC: eth0 as "ADDR/PREFIX GATEWAY", or "-" for no network. */
  NET: 17,
  /** HELLO: the root disk's size (u64); a guest waiting for its root (a warm template's clone) mounts it first. */
  ROOT: 18,
} as const;

export const Flag = {
  APPEND: 1 << 0,
  RECURSIVE: 1 << 1,
  STDIN_OPEN: 1 << 2,
  PTY: 1 << 3,
} as const;
