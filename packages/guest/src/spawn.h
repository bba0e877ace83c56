/* Starting an EXEC's process (spawn.c). */
#ifndef SANDTREE_SPAWN_H
#define SANDTREE_SPAWN_H
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

enum stage { ST_CWD = 1, ST_CRED = 2, ST_EXEC = 3 };

/* What the child needs. It runs on its own stack but in the agent's memory (CLONE_VM |
 * CLONE_VFORK: no page tables copied, the agent waits until it exec'd or exited), so it
 * reports a failure by writing stage and errnum here before _exit, and touches nothing else. */
struct spawn {
  const struct req *r;
  char **argv, **env;
  const struct user_info *u;
  int in, out, err, pty; /* the child's 0, 1, 2; pty: `in` is the slave */
  int stage, errnum;     /* set by the child on failure */
};


static inline unsigned short winsize_of(int has, uint32_t v, unsigned short dflt) {
  return has && v > 0 && v <= 0xffff ? (unsigned short)v : dflt;
}

/* Builds the environment, opens a pty (FLAG_PTY) or pipes, and starts argv as user u. Returns
 * 0 with *pid set and keep[] = the agent's ends (output, stderr, input; -1 where none), or an
 * errno with everything closed. The child's own setup or exec failure is in sp->stage and
 * sp->errnum (argv stays the caller's). */
int spawn_start(const struct req *r, char **argv, const struct user_info *u, struct spawn *sp,
                int keep[3], pid_t *pid);
void close_all(int *fds, int n); /* closes each fd >= 0 */

#endif
