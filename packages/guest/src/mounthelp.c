/* The agent binary as a mount helper: the host runs `/proc/1/exe mount SOURCE TARGET TYPE
 * OPTIONS [ro]` through EXEC (as root) to mount a shared volume. The kernel parses the text
 * options itself (an NFS mount with explicit port=/mountport= needs no mount.nfs and no rpcbind
 * in the guest), so the user's image needs nothing. Idempotent: a target that already holds
 * SOURCE (a memory checkpoint's clone resumes with its mounts) is left as it is. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
      *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
      r += 3;
    } else {
      *w++ = *r;
    }
  }
  *w = 0;
}

/* 1 when TARGET is a mount point of SOURCE now. */
static int mounted(const char *source, const char *target) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) return 0;
  char line[8192];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    /* id parent maj:min root mountpoint opts... - fstype source superopts */
    char *save = NULL, *field = strtok_r(line, " ", &save);
    char *mp = NULL, *src = NULL;
    for (int i = 0; field; i++, field = strtok_r(NULL, " ", &save)) {
      if (i == 4) mp = field;
      if (strcmp(field, "-") == 0) {
        strtok_r(NULL, " ", &save); /* fstype */
        src = strtok_r(NULL, " ", &save);
        break;
      }
    }
    if (!mp || !src) continue;
    unescape(mp);
    unescape(src);
    found = strcmp(mp, target) == 0 && strcmp(src, source) == 0;
  }
  fclose(f);
  return found;
}

static int mkdirs(const char *path) {
  char p[4096];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return ENAMETOOLONG;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0755) < 0 && errno != EEXIST) return errno;
    *s = '/';
  }
  if (mkdir(p, 0755) < 0 && errno != EEXIST) return errno;
  return 0;
}

int mount_main(int argc, char **argv) {
  if (argc < 6 || argc > 7 || (argc == 7 && strcmp(argv[6], "ro") != 0)) {
    fprintf(stderr, "usage: %s mount SOURCE TARGET TYPE OPTIONS [ro]\n", argv[0]);
    return 2;
  }
  const char *source = argv[2], *target = argv[3], *type = argv[4], *opts = argv[5];
  if (target[0] != '/') {
    fprintf(stderr, "mount: %s: not an absolute path\n", target);
    return 2;
  }
  if (mounted(source, target)) {
    printf("already mounted\n");
    return 0;
  }
  int err = mkdirs(target);
  if (err) {
    fprintf(stderr, "mount: mkdir %s: %s\n", target, strerror(err));
    return 1;
  }
  /* No device nodes or set-uid programs from a shared volume: another sandbox wrote them. */
  unsigned long flags = MS_NODEV | MS_NOSUID | (argc == 7 ? MS_RDONLY : 0);
  if (mount(source, target, type, flags, opts) < 0) {
    fprintf(stderr, "mount: %s on %s: %s\n", source, target, strerror(errno));
    return 1;
  }
  printf("mounted\n");
  return 0;
}
