/* USER lookup from the image's /etc/passwd and /etc/group. Parsed by hand: static glibc's
 * getpwnam needs NSS modules that a static binary cannot load. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Splits a colon-separated line in place into at most n fields; returns the count. */
static int fields(char *line, char **f, int n) {
  int k = 0;
  line[strcspn(line, "\n")] = 0;
  while (k < n) {
    f[k++] = line;
    char *c = strchr(line, ':');
    if (!c) break;
    *c = 0;
    line = c + 1;
  }
  return k;
}

static int parse_id(const char *s, unsigned long *v) {
  char *end;
  if (!*s) return -1;
  errno = 0;
  *v = strtoul(s, &end, 10);
  return (*end || errno || *v > 0xfffffffeul) ? -1 : 0;
}

static void add_groups(struct user_info *u) {
  u->groups[0] = u->gid;
  u->ngroups = 1;
  FILE *f = fopen("/etc/group", "re");
  if (!f) return;
  char line[4096], *fl[4];
  while (fgets(line, sizeof line, f) && u->ngroups < 64) {
    unsigned long gid;
    if (fields(line, fl, 4) < 4 || parse_id(fl[2], &gid)) continue;
    for (char *m = strtok(fl[3], ","); m; m = strtok(NULL, ","))
      if (strcmp(m, u->name) == 0 && gid != u->gid) { u->groups[u->ngroups++] = (gid_t)gid; break; }
  }
  fclose(f);
}

int user_lookup(const char *spec, struct user_info *u) {
  unsigned long want;
  int numeric = parse_id(spec, &want) == 0;
  memset(u, 0, sizeof *u);
  FILE *f = fopen("/etc/passwd", "re");
  char line[4096], *fl[7];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) {
    unsigned long uid, gid;
    if (fields(line, fl, 7) < 7 || parse_id(fl[2], &uid) || parse_id(fl[3], &gid)) continue;
    if (numeric ? uid != want : strcmp(fl[0], spec) != 0) continue;
    u->uid = (uid_t)uid;
    u->gid = (gid_t)gid;
    snprintf(u->name, sizeof u->name, "%s", fl[0]);
    snprintf(u->home, sizeof u->home, "%s", fl[5][0] ? fl[5] : "/");
    found = 1;
  }
  if (f) fclose(f);
  if (!found) {
    if (!numeric) return ENOENT;
    /* A uid without an entry runs with gid 0 and HOME=/ (what container runtimes do). */
    u->uid = (uid_t)want;
    u->gid = 0;
    snprintf(u->name, sizeof u->name, "%lu", want);
    snprintf(u->home, sizeof u->home, "%s", want == 0 ? "/root" : "/");
  }
  add_groups(u);
  return 0;
}
