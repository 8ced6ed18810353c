/* procinfo: see procinfo.h. The fields and their sources are those of the
 * Prometheus Go client's process collector, so dashboards built for it
 * read emqd the same way. */
#include "procinfo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The whole of a small procfs file into buf (NUL-terminated). Its length,
 * or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = 0;
    ssize_t n;
    while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    int err = n < 0 ? -errno : 0;
    close(fd);
    buf[len] = '\0';
    return err != 0 ? err : (ssize_t)len;
}

/* When the process started, from its start in clock ticks after boot:
 * the wall clock now less the time since then on the boot clock (the
 * clock starttime counts on). It does not change, so it is worked out
 * once (later wall-clock steps do not move it). */
static double start_time(unsigned long long ticks)
{
    static double at;
    struct timespec wall, boot;
    long hz = sysconf(_SC_CLK_TCK);
    if (at == 0 && clock_gettime(CLOCK_REALTIME, &wall) == 0 &&
        clock_gettime(CLOCK_BOOTTIME, &boot) == 0) {
        double up = (double)boot.tv_sec + (double)boot.tv_nsec / 1e9;
        at = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9 - up +
             (double)ticks / (double)(hz > 0 ? hz : 100);
    }
    return at;
}

/* Fields 22 (starttime, clock ticks after boot), 23 (vsize, bytes) and
 * 24 (rss, pages) of /proc/self/stat. Field 2, the command name, is in
 * parentheses and may hold spaces or parentheses itself, so counting
 * starts after the last ')'. */
static int read_stat(struct procinfo *out)
{
    char buf[1024];
    ssize_t n = read_small("/proc/self/stat", buf, sizeof(buf));
    if (n < 0)
        return (int)n;
    const char *p = strrchr(buf, ')');
    if (p == NULL)
        return -EINVAL;
    p += 2; /* ") ": p is at field 3, the state */
    unsigned long long f[25] = {0};
    int i = 3;
    for (; i <= 24 && p != NULL; i++) {
        f[i] = strtoull(p, NULL, 10); /* field 3, a letter, reads as 0 */
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    if (i <= 24)
        return -EINVAL;
    long page = sysconf(_SC_PAGESIZE);
    out->start_time = start_time(f[22]);
    out->virtual_bytes = f[23];
    out->resident_bytes = f[24] * (unsigned long long)(page > 0 ? page : 4096);
    return 0;
}

/* Open descriptors: the entries of /proc/self/fd but the one the listing
 * itself holds open. */
static int count_fds(uint64_t *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -errno;
    int self = dirfd(d);
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && atoi(e->d_name) != self)
            n++;
    closedir(d);
    *out = n;
    return 0;
}

int procinfo_read(struct procinfo *out)
{
    struct rusage ru;
    struct rlimit rl;
    int rc = read_stat(out);
    if (rc == 0)
        rc = count_fds(&out->open_fds);
    if (rc != 0)
        return rc;
    getrusage(RUSAGE_SELF, &ru);
    out->cpu_seconds = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    out->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 0;
    return 0;
}
