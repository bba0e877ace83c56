/* Shared by the PID-1 boot files: init.c (mounts, root disk, power-off) and modules.c (kernel
 * modules, the modules disk, KVM, static device nodes). */
#ifndef SANDTREE_BOOT_H
#define SANDTREE_BOOT_H
#include <stddef.h>

/* init.c */
void sleep_ms(long ms);
void mkdirs(const char *path); /* mkdir -p */
void write_file(const char *path, const char *text);
/* The value of key=VALUE on the kernel command line, or def. */
void cmdline_get(const char *key, char *out, size_t n, const char *def);

/* modules.c */
void modules_boot(void);   /* initramfs modules; reads sandtree.modules and sandtree.kvm */
int modules_disk_on(void); /* sandtree.modules=on: a modules disk is attached */
/* Mounts the modules disk at dst and points the kernel's module loader (procdir/sys/kernel/modprobe)
 * at its modprobe; loads KVM from it when asked. */
void mount_modules_at(const char *dst, const char *procdir);
void mount_modules(const char *root); /* at root/lib/modules/<release> */
void static_nodes(const char *root);  /* root/dev nodes of modules.devname */

#endif
