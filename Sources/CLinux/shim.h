/* Header-only: Linux calls Swift's Glibc module does not expose (epoll, eventfd, timerfd, accept4,
 * pthread_setname_np, getrandom). */
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
#include <sys/random.h>
#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);
#endif
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
