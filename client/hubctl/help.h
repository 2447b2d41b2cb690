/* help: each command's own usage, for `hubctl CMD --help`, `hubctl hf
 * SUB --help` and `hubctl help CMD`. One row per command (the whole
 * program's usage stays in cli.c). */
#ifndef HUBCTL_HELP_H
#define HUBCTL_HELP_H

/* Prints the usage of cmd ("fetch", "hf download", ...) on stdout: 0, or
 * -1 when there is no such command (nothing printed). */
int help_print(const char *cmd);

/* `hubctl help [CMD [SUB]]`: words are the operands after "help". Returns
 * the exit code (a usage error for an unknown command). */
int help_run(const char *const *words, int nwords, void (*whole)(void));

#endif
