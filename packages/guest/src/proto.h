/* Wire constants of docs/protocol.md: the source. The agent and the fuzzer include it; guest-frames.ts
   (host) and tools/agentctl.py copy it, and packages/guest/test/wire-constants.test.ts checks they agree. */
#ifndef SANDTREE_PROTO_H
#define SANDTREE_PROTO_H

#define FRAME_MAGIC0 0x54 /* magic 0x5354, little-endian on the wire */
#define FRAME_MAGIC1 0x53
#define FRAME_HDR 12
#define FRAME_MAX (1u << 20)
#define PROTO_VERSION 1
#define INITIAL_CREDIT (4u << 20) /* a few frames in flight: 256 KiB was one frame, then a wait */
#define HELLO_NONCE 16

enum frame_type {
  T_HELLO = 0x01, T_HELLO_ACK = 0x02, T_READY = 0x03, T_PING = 0x04, T_PONG = 0x05,
  T_SHUTDOWN = 0x06, T_SYNC = 0x07,
  T_EXEC = 0x10, T_STDIN = 0x11, T_STDIN_CLOSE = 0x12, T_SIGNAL = 0x13, T_WINDOW = 0x14,
  T_RESIZE = 0x15,
  T_FILE_WRITE = 0x20, T_DATA = 0x21, T_END = 0x22, T_FILE_READ = 0x23, T_STAT = 0x24,
  T_LIST = 0x25, T_MKDIR = 0x26, T_REMOVE = 0x27, T_CANCEL = 0x28, T_FSFREEZE = 0x29,
  T_FSTHAW = 0x2A,
  T_RESULT = 0x30, T_ERROR = 0x31,
  T_STDOUT = 0x40, T_STDERR = 0x41, T_STARTED = 0x42, T_EXIT = 0x43,
};

enum tlv_tag {
  TAG_ARG = 1, TAG_ENV = 2, TAG_CWD = 3, TAG_USER = 4, TAG_TIMEOUT_MS = 5, TAG_SHELL = 6,
  TAG_PATH = 7, TAG_OFFSET = 8, TAG_LENGTH = 9, TAG_MODE = 10, TAG_FLAGS = 11, TAG_SIGNUM = 12,
  TAG_TIME_NS = 13, TAG_ENTROPY = 14, TAG_ROWS = 15, TAG_COLS = 16,
  TAG_NET = 17, /* HELLO/SYNC: "ADDR/PREFIX GATEWAY" for eth0, or "-" for no network */
  TAG_ROOT = 18, /* HELLO: u64 root disk size; a guest booted with sandtree.root=wait mounts it */
};

#define FLAG_APPEND 0x1u
#define FLAG_PARENTS 0x2u /* also "recursive" for REMOVE */
#define FLAG_STDIN 0x4u
#define FLAG_PTY 0x8u /* EXEC: run on a new pseudo-terminal (stdin is then always open) */

#endif
