/*
 * private-ram-discard.so: preloaded into a copy-on-write clone's QEMU (LD_PRELOAD) so that a
 * guest's free page reporting drops only the clone's private copies of the freed pages, never the
 * template's RAM file that every clone of it maps.
 *
 * QEMU 7.2 discards guest RAM (ram_block_discard_range, softmmu/physmem.c) with
 * fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) on the RAM block's file whenever it
 * has one, then madvise(MADV_DONTNEED). On a `memory-backend-file,share=off` mapping the hole is
 * punched in the shared file: every other clone then reads zeros where the template had data
 * (bench/free-page-reporting.py shows it). QEMU 8.2 skips the fallocate for private file
 * mappings; this does the same for 7.2: a hole punched in the file named by
 * SANDTREE_PRIVATE_RAM ("DEV:INO", decimal, as stat gives them) returns 0 without acting, so
 * QEMU goes on to its madvise(MADV_DONTNEED), which frees the private copies (later reads fall
 * back to the file's pages). Every other fallocate, and any on another file (qcow2 discards and
 * write-zeroes on the disks), goes to the kernel as it is. Nothing else is changed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static dev_t ram_dev;
static ino_t ram_ino;
static int ram_known;

__attribute__((constructor)) static void read_ram_file(void) {
  const char *v = getenv("SANDTREE_PRIVATE_RAM");
  if (!v) return;
  char *end;
  unsigned long long dev = strtoull(v, &end, 10);
  if (end == v || *end != ':') return;
  const char *i = end + 1;
  unsigned long long ino = strtoull(i, &end, 10);
  if (end == i || *end != '\0') return;
  ram_dev = (dev_t)dev;
  ram_ino = (ino_t)ino;
  ram_known = 1;
}

static int is_private_ram(int fd) {
  struct stat st;
  return ram_known && fstat(fd, &st) == 0 && st.st_dev == ram_dev && st.st_ino == ram_ino;
}

static int do_fallocate(int fd, int mode, off_t offset, off_t len) {
  if ((mode & FALLOC_FL_PUNCH_HOLE) && is_private_ram(fd)) return 0;
  return (int)syscall(SYS_fallocate, fd, mode, offset, len);
}

int fallocate(int fd, int mode, off_t offset, off_t len) { return do_fallocate(fd, mode, offset, len); }
int fallocate64(int fd, int mode, off_t offset, off_t len) { return do_fallocate(fd, mode, offset, len); }
