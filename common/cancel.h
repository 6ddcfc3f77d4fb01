/*
 * cancel.h: the process-wide cancellation flag (the only other global).
 * Signal handlers only set it; loops poll jo_cancelled() between items and
 * library calls then return JO_ECANCELED. A second SIGINT exits at once.
 */
#ifndef JO_CANCEL_H
#define JO_CANCEL_H

#include <pthread.h>

/* Install SIGINT/SIGTERM handlers that set the flag; ignore SIGPIPE. */
void jo_cancel_install(void);
/* Non-zero once a signal arrived: the signal number (0 in a shielded thread). */
int jo_cancelled(void);
/*
 * Shield the calling thread (nestable): while shielded, jo_cancelled()
 * returns 0 in it, so a unit of work that must not be cut in the middle
 * (gc's delete batch in flight) runs to its end after SIGTERM/SIGINT.
 * A second SIGINT still exits at once. jo_cancel_signal() ignores shields.
 */
void jo_cancel_shield(int on);
int jo_cancel_signal(void);

/*
 * pthread_create with every signal blocked in the new thread, so SIGINT and
 * SIGTERM always reach the main thread (whose handler sets the flag the
 * workers poll). Returns pthread_create's result.
 */
int jo_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);
/* Set the flag by hand (tests, fatal worker errors). */
void jo_cancel_request(int signo);
/* Run fn at cancellation or normal exit (temp-file cleanup). At most 32. */
int jo_cancel_atexit(void (*fn)(void *), void *payload);
void jo_cancel_atexit_remove(void (*fn)(void *), void *payload);

#endif
