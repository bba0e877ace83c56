#ifndef SANDTREE_OUTQ_H
#define SANDTREE_OUTQ_H
#include <stddef.h>
size_t outq_pending(void);
int outq_flush(int fd); /* writes until EAGAIN; -1 on a hard error */
/* Drops queued frames. keep_partial: a frame already partly written is kept whole, so the
 * byte stream the host sees stays well-formed (used on HELLO). */
void outq_drop(int keep_partial);
#endif
