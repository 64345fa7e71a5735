/* Header-only: Linux calls Swift's Glibc module does not expose (epoll, eventfd, timerfd, accept4,
 * pthread_setname_np, getrandom, sync_file_range). */
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
#include <sys/random.h>
#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);
#include <fcntl.h>
extern int sync_file_range(int fd, __off64_t offset, __off64_t nbytes, unsigned int flags);
/* SYNC_FILE_RANGE_WRITE, which <fcntl.h> defines only with _GNU_SOURCE. */
static const unsigned int clinux_sync_file_range_write = 2;
#endif
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
