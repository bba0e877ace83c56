/* File streams (FILE_WRITE, FILE_READ, LIST) and one-shot requests (STAT, MKDIR, REMOVE). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"

#define CHUNK 65536
#define READ_FRAME (256u * 1024u) /* largest DATA frame of a FILE_READ */

static void result_empty(uint32_t id) { send_frame(T_RESULT, id, "{}", 2); }

static void result_bytes(uint8_t type, uint32_t id, uint64_t bytes) {
  struct jbuf j;
  jb_init(&j);
  jb_lit(&j, "{\"bytes\":"); jb_int(&j, (int64_t)bytes); jb_lit(&j, "}");
  send_json(type, id, &j);
}

/* Stat JSON of docs/protocol.md; name is added for LIST entries. */
static void stat_json(struct jbuf *j, int dirfd, const char *path, const char *name,
                      const struct stat *st) {
  const char *type = S_ISREG(st->st_mode) ? "file" : S_ISDIR(st->st_mode) ? "dir"
                   : S_ISLNK(st->st_mode) ? "symlink" : "other";
  jb_lit(j, "{");
  if (name) { jb_key(j, "name"); jb_str(j, name, strlen(name)); }
  jb_key(j, "type"); jb_str(j, type, strlen(type));
  jb_key(j, "size"); jb_int(j, (int64_t)st->st_size);
  jb_key(j, "mode"); jb_int(j, st->st_mode & 07777);
  jb_key(j, "uid"); jb_int(j, st->st_uid);
  jb_key(j, "gid"); jb_int(j, st->st_gid);
  jb_key(j, "mtime_ms");
  jb_int(j, (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000);
  if (S_ISLNK(st->st_mode)) {
    char t[4096];
    ssize_t n = readlinkat(dirfd, path, t, sizeof t);
    if (n >= 0) { jb_key(j, "target"); jb_str(j, t, (size_t)n); }
  }
  jb_lit(j, "}");
}

/* mkdir -p for path's components; the last one too when last is set. */
static int mkdirs(const char *path, mode_t mode, int last) {
  char *p = strdup(path);
  if (!p) return ENOMEM;
  int err = 0;
  for (char *c = p + 1; !err; c++) {
    if (*c != '/' && *c != 0) continue;
    char save = *c;
    if (save == 0 && !last) break;
    *c = 0;
    struct stat st;
    if (mkdir(p, mode) < 0 && errno != EEXIST) err = errno;
    else if (stat(p, &st) == 0 && !S_ISDIR(st.st_mode)) err = ENOTDIR;
    *c = save;
    if (save == 0) break;
  }
  free(p);
  return err;
}

/* Recursive delete that never follows symlinks: directories are opened with O_NOFOLLOW
 * relative to their parent's descriptor. */
static int remove_at(int dirfd, const char *name) {
  if (unlinkat(dirfd, name, 0) == 0) return 0;
  if (errno != EISDIR && errno != EPERM) return errno;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR *d = fdopendir(fd);
  if (!d) { int e = errno; close(fd); return e; }
  int err = 0;
  struct dirent *de;
  while (!err && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    err = remove_at(fd, de->d_name);
  }
  closedir(d);
  if (!err && unlinkat(dirfd, name, AT_REMOVEDIR) < 0) err = errno;
  return err;
}

static int parent_dirs(const char *path) {
  char *p = strdup(path);
  if (!p) return ENOMEM;
  char *slash = strrchr(p, '/');
  int err = 0;
  if (slash && slash != p) { *slash = 0; err = mkdirs(p, 0755, 1); }
  free(p);
  return err;
}

static void file_write(uint32_t id, struct req *r) {
  int err = parent_dirs(r->path);
  if (err) { send_error(id, err, NULL); return; }
  int fl = O_WRONLY | O_CREAT | O_CLOEXEC | ((r->flags & FLAG_APPEND) ? O_APPEND : O_TRUNC);
  int fd = open(r->path, fl, r->has_mode ? (r->mode & 07777) : 0644);
  if (fd < 0) { send_error(id, errno, NULL); return; }
  if (r->has_mode && fchmod(fd, r->mode & 07777) < 0) {
    send_error(id, errno, NULL); close(fd); return;
  }
  struct stream *s = stream_new(id, S_FWRITE);
  if (!s) { close(fd); send_error(id, ENOMEM, NULL); return; }
  s->fd = fd;
}

static void file_read(uint32_t id, struct req *r) {
  int fd = open(r->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { send_error(id, errno, NULL); return; }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) { close(fd); send_error(id, EISDIR, NULL); return; }
  if (r->has_offset && lseek(fd, (off_t)r->offset, SEEK_SET) < 0) {
    send_error(id, errno, NULL); close(fd); return;
  }
  struct stream *s = stream_new(id, S_FREAD);
  if (!s) { close(fd); send_error(id, ENOMEM, NULL); return; }
  s->fd = fd;
  s->bounded = r->has_length;
  s->remaining = r->length;
}

static void list(uint32_t id, struct req *r) {
  DIR *d = opendir(r->path);
  if (!d) { send_error(id, errno, NULL); return; }
  struct stream *s = stream_new(id, S_LIST);
  if (!s) { closedir(d); send_error(id, ENOMEM, NULL); return; }
  s->dir = d;
}

void files_request(uint8_t type, uint32_t id, struct req *r) {
  if (!r->path || r->path[0] != '/') { send_error(id, EINVAL, "PATH must be absolute"); return; }
  struct stat st;
  int err;
  switch (type) {
    case T_FILE_WRITE: file_write(id, r); return;
    case T_FILE_READ: file_read(id, r); return;
    case T_LIST: list(id, r); return;
    case T_STAT: {
      if (lstat(r->path, &st) < 0) { send_error(id, errno, NULL); return; }
      struct jbuf j;
      jb_init(&j);
      stat_json(&j, AT_FDCWD, r->path, NULL, &st);
      send_json(T_RESULT, id, &j);
      return;
    }
    case T_MKDIR: {
      mode_t mode = r->has_mode ? (r->mode & 07777) : 0755;
      if (r->flags & FLAG_PARENTS) err = mkdirs(r->path, mode, 1);
      else err = mkdir(r->path, mode) < 0 ? errno : 0;
      if (err) send_error(id, err, NULL); else result_empty(id);
      return;
    }
    case T_REMOVE:
      if (r->flags & FLAG_PARENTS) err = remove_at(AT_FDCWD, r->path);
      else if (lstat(r->path, &st) < 0) err = errno;
      else err = (S_ISDIR(st.st_mode) ? rmdir(r->path) : unlink(r->path)) < 0 ? errno : 0;
      if (err) send_error(id, err, NULL); else result_empty(id);
      return;
  }
}

void files_frame(struct stream *s, uint8_t type, const uint8_t *p, size_t n) {
  if (s->kind == S_FWRITE) {
    if (type == T_DATA) {
      while (n > 0) { /* synchronous: DATA to files is not credit-limited */
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) { send_error(s->id, errno, NULL); stream_end(s); return; }
        p += w; n -= (size_t)w; s->bytes += (uint64_t)w;
      }
    } else if (type == T_END) {
      int e = close(s->fd) < 0 ? errno : 0;
      s->fd = -1;
      if (e) send_error(s->id, e, NULL); else result_bytes(T_RESULT, s->id, s->bytes);
      stream_end(s);
    } else if (type == T_CANCEL) {
      send_error(s->id, ECANCELED, "cancelled");
      stream_end(s);
    }
  } else if (type == T_CANCEL) { /* FILE_READ, LIST */
    result_bytes(T_END, s->id, s->bytes);
    stream_end(s);
  }
}

static void pump_read(struct stream *s) {
  while (s->credit && outq_room()) {
    size_t max = s->credit < READ_FRAME ? (size_t)s->credit : READ_FRAME;
    if (s->bounded && s->remaining < max) max = (size_t)s->remaining;
    ssize_t r = max ? send_read(T_DATA, s->id, s->fd, max) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { send_error(s->id, errno, NULL); stream_end(s); return; }
    if (r == 0) { result_bytes(T_END, s->id, s->bytes); stream_end(s); return; }
    s->credit -= (uint64_t)r;
    s->bytes += (uint64_t)r;
    if (s->bounded) s->remaining -= (uint64_t)r;
  }
}

/* LIST: one NDJSON line per entry, packed into DATA frames within the credit. Lines are
 * never split, so a single line larger than the remaining credit is sent whole. */
static void pump_list(struct stream *s) {
  struct jbuf j;
  jb_init(&j);
  int done = 0;
  while (!done && j.len < CHUNK && j.len < s->credit) {
    long pos = telldir(s->dir);
    errno = 0;
    struct dirent *de = readdir(s->dir);
    if (!de) { done = errno ? -errno : 1; break; }
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dirfd(s->dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue;
    size_t before = j.len;
    stat_json(&j, dirfd(s->dir), de->d_name, de->d_name, &st);
    jb_lit(&j, "\n");
    if (j.len > s->credit && before > 0) { /* re-read this entry for the next frame */
      j.len = before;
      seekdir(s->dir, pos);
      break;
    }
  }
  if (j.len) {
    send_frame(T_DATA, s->id, j.p, j.len);
    s->credit = s->credit > j.len ? s->credit - j.len : 0;
    s->bytes += j.len;
  }
  jb_free(&j);
  if (done < 0) { send_error(s->id, -done, NULL); stream_end(s); }
  else if (done) { result_bytes(T_END, s->id, s->bytes); stream_end(s); }
}

void files_pump(struct stream *s) {
  if (s->detached || !s->credit || !outq_room()) return;
  if (s->kind == S_FREAD) pump_read(s);
  else if (s->kind == S_LIST) pump_list(s);
}
