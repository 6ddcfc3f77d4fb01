#include "common/cancel.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t cancel_flag;
static _Thread_local int shield_depth;

struct cleanup { void (*fn)(void *); void *payload; };
static struct cleanup cleanups[32];
static int ncleanups;
static pthread_mutex_t cleanup_lock = PTHREAD_MUTEX_INITIALIZER;

static void run_cleanups(void)
{
	for (int i = ncleanups - 1; i >= 0; i--)
		if (cleanups[i].fn)
			cleanups[i].fn(cleanups[i].payload);
}

static void on_signal(int signo)
{
	if (cancel_flag && signo == SIGINT) {
		/* second ^C: the user wants out now; cleanups only unlink files */
		run_cleanups();
		_exit(128 + signo);
	}
	cancel_flag = signo;
}

void jo_cancel_install(void)
{
	struct sigaction sa = { 0 };

	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	atexit(run_cleanups);
}

int jo_cancelled(void)
{
	return shield_depth > 0 ? 0 : cancel_flag;
}

int jo_cancel_signal(void)
{
	return cancel_flag;
}

void jo_cancel_shield(int on)
{
	shield_depth += on ? 1 : -1;
	if (shield_depth < 0)
		shield_depth = 0;
}

void jo_cancel_request(int signo)
{
	cancel_flag = signo;
}

int jo_cancel_atexit(void (*fn)(void *), void *payload)
{
	int rc = -1;

	pthread_mutex_lock(&cleanup_lock);
	if (ncleanups < 32) {
		cleanups[ncleanups].fn = fn;
		cleanups[ncleanups].payload = payload;
		ncleanups++;
		rc = 0;
	}
	pthread_mutex_unlock(&cleanup_lock);
	return rc;
}

void jo_cancel_atexit_remove(void (*fn)(void *), void *payload)
{
	pthread_mutex_lock(&cleanup_lock);
	for (int i = 0; i < ncleanups; i++) {
		if (cleanups[i].fn == fn && cleanups[i].payload == payload) {
			cleanups[i] = cleanups[ncleanups - 1];
			ncleanups--;
			break;
		}
	}
	pthread_mutex_unlock(&cleanup_lock);
}

int jo_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int e;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	e = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return e;
}
