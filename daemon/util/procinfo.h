/* procinfo: the daemon process's own numbers behind the standard process_*
 * metrics of Prometheus client libraries (CPU, memory, descriptors, start
 * time). Read from procfs and getrusage/getrlimit at each call: procfs
 * answers from kernel memory, so a scrape does no disk I/O. Linux only. */
#ifndef EMQ_PROCINFO_H
#define EMQ_PROCINFO_H

#include <stdint.h>

struct procinfo {
    double cpu_seconds;      /* user + system CPU used so far (getrusage) */
    uint64_t resident_bytes; /* resident set size (/proc/self/stat rss) */
    uint64_t virtual_bytes;  /* virtual memory size (/proc/self/stat vsize) */
    uint64_t open_fds;       /* entries of /proc/self/fd, the one reading it excluded */
    uint64_t max_fds;        /* the soft RLIMIT_NOFILE */
    double start_time;       /* when the process started, seconds since the epoch */
};

/* Read the numbers now. 0, or -errno (procfs unreadable; nothing in out
 * is valid then). */
int procinfo_read(struct procinfo *out);

#endif
