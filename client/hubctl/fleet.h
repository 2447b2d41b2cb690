/* fleet: `hubctl fleet status`, the cluster swarm as the daemon's node sees
 * it (FLEET, docs/PROTOCOL.md): its totals, the files in the swarm and the
 * peers connected, as tables or (--json) one JSON object. */
#ifndef HUBCTL_FLEET_H
#define HUBCTL_FLEET_H

#include "cli.h"

/* `hubctl fleet SUB`: runs it to the end; returns the exit code. */
int fleet_run(const cli_t *c);

#endif
