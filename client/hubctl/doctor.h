/* doctor: `hubctl doctor` says in one screen whether this user can use
 * hubd and, when not, why and what to do (join the socket's group, log in
 * again, ask an admin to look at systemd's status). The socket checked is
 * the one hubctl would use when named: `given` (--socket), else
 * $HUBD_SOCKET, else the system hubd's. Prints on stdout; returns EXIT_OK
 * when that daemon answers this user, else EXIT_UNREACHABLE. */
#ifndef HUBCTL_DOCTOR_H
#define HUBCTL_DOCTOR_H

int doctor_run(const char *given);

#endif
