/* doctor: `hubctl doctor` says in one screen whether this user can use the
 * system hubd and, when not, why and what to do (join the socket's group,
 * log in again, ask an admin to look at systemd's status). Prints on
 * stdout; returns EXIT_OK when the system daemon answers this user, else
 * EXIT_UNREACHABLE. */
#ifndef HUBCTL_DOCTOR_H
#define HUBCTL_DOCTOR_H

int doctor_run(void);

#endif
