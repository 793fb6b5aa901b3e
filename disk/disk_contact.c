/* disk_contact.c — when this directory's owner last heard from a master, kept in DIR/CONTACT
 * (issue 44 W6 on the disk tier). A master forgets an owner that stays away longer than its
 * dead_owner_grace_ms, and with it the deletions that owner missed; a master that restarted
 * since cannot even say it forgot. So the owner writes, every few seconds while registered,
 * the wall-clock time and the master's grace here; started again after a longer absence, it
 * drops its records instead of re-publishing what may have been deleted meanwhile.
 *
 * The file: 64 bytes {magic "FXDC", version 1, 0, contact_ms (CLOCK_REALTIME), grace_ms, 0,
 * XXH3-64 over the first 56 bytes}. Read with pread at open (before the reactor runs),
 * written through the reactor's ring (one write in flight at most). A missing or damaged
 * file says nothing (never stale). Reactor thread only. */
#include "disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <xxhash.h>

#include "log.h"

#define DK_CONTACT_MAGIC 0x43445846u /* "FXDC" */

static uint64_t dk_contact_sum(const dk_contact_rec_t *c)
{
    return XXH3_64bits(c, offsetof(dk_contact_rec_t, checksum));
}

FX_INTERNAL void fx_disk_contact_open(fx_disk_t *d)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/CONTACT", d->path);
    d->contact_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (d->contact_fd < 0) {
        FX_WARN("disk: %s: cannot open CONTACT (%s): a restart after a long absence cannot be told", d->path,
                strerror(errno));
        return;
    }
    dk_contact_rec_t c;
    if (pread(d->contact_fd, &c, sizeof c, 0) != (ssize_t)sizeof c) return; /* new, or short: nothing known */
    if (c.magic != DK_CONTACT_MAGIC || c.version != 1 || dk_contact_sum(&c) != c.checksum) {
        FX_WARN("disk: %s/CONTACT fails its checks: ignored", d->path);
        return;
    }
    d->contact_known = true;
    d->contact_ms = c.contact_ms;
    d->contact_grace_ms = c.grace_ms;
}

FX_INTERNAL bool fx_disk_last_contact(const fx_disk_t *d, uint64_t *contact_ms, uint64_t *grace_ms)
{
    if (!d->contact_known) return false;
    *contact_ms = d->contact_ms;
    *grace_ms = d->contact_grace_ms;
    return true;
}

static void dk_on_contact(fx_reactor_t *r, fx_io_t *io, int res, uint32_t fl)
{
    (void)r, (void)fl;
    fx_disk_t *d = FX_CONTAINER_OF(io, fx_disk_t, contact_io);
    d->ops--;
    d->contact_inflight = false;
    if (res == (int)sizeof(dk_contact_rec_t)) d->st.contact_writes++;
    else if (!d->contact_failed++) /* logged once */
        FX_WARN("disk: %s: writing CONTACT failed (%s)", d->path, res < 0 ? strerror(-res) : "short write");
}

FX_INTERNAL void fx_disk_note_contact(fx_disk_t *d, uint64_t contact_ms, uint64_t grace_ms)
{
    if (d->contact_fd < 0 || d->contact_inflight || d->closing) return;
    dk_contact_rec_t *c = &d->contact_buf;
    *c = (dk_contact_rec_t){.magic = DK_CONTACT_MAGIC, .version = 1, .contact_ms = contact_ms, .grace_ms = grace_ms};
    c->checksum = dk_contact_sum(c);
    d->contact_io.cb = dk_on_contact;
    struct io_uring_sqe *sqe = fx_reactor_sqe(d->r, &d->contact_io);
    io_uring_prep_write(sqe, d->contact_fd, c, sizeof *c, 0);
    d->contact_inflight = true;
    d->ops++;
}
