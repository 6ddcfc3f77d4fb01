/* proctitle.h: secrets of the command line hidden from ps (/proc/PID/cmdline). */
#ifndef JO_CMD_PROCTITLE_H
#define JO_CMD_PROCTITLE_H

/*
 * When an argument holds a secret (the value of --secret-key,
 * --src-secret-key, --dst-secret-key; the password of a URL
 * "scheme://user:PASSWORD@..."; a URL query value named ...password...,
 * ...secret..., ...token...), return a copy of argv on the heap, secrets
 * intact, for the command to parse, and rewrite the process's own argument
 * area as the line ps is to show: the arguments joined by spaces, each
 * secret "****" whatever its length. Otherwise, or when the area cannot be
 * rewritten (not contiguous, no memory), return argv itself. Call it first
 * in main(), before any thread starts; the copy lives as long as the process.
 */
char **cmd_hide_secrets(int argc, char **argv);

#endif
