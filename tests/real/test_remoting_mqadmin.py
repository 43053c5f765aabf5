"""`mqadmin` (RocketMQ 5.x tools, unchanged) against the emulator's remoting front end: the commands
docs/protocols.md lists beyond those test_real_java_client.py already runs (updateSubGroup, clusterList,
consumerProgress, resetOffsetByTime), checked against what the emulator's store holds."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.real import realcluster as rc

pytestmark = [pytest.mark.realbroker, pytest.mark.timeout(600)]


def test_mqadmin_cluster_group_progress_and_reset(emulator_remoting: rc.Cluster):
    c = emulator_remoting
    emu = c.emulator
    topic, group = f"adm-{uuid.uuid4().hex[:8]}", f"adm-g-{uuid.uuid4().hex[:8]}"
    c.create_topics([(topic, 4, None)])
    sends = [x for x in c.java_driver("Produce", topic, "12", "single") if "status" in x]
    assert len(sends) == 12
    before_second = int(time.time() * 1000)
    time.sleep(0.05)
    sends += [x for x in c.java_driver("Produce", topic, "8", "single") if "status" in x]
    assert len(sends) == 20  # (a second round lost to a send timeout once showed up as "read 12 of 20")
    got = [x for x in c.java_driver("LitePull", topic, group, "20", "60") if "event" not in x]
    assert len(got) == 20

    out_group, out_cluster, out_progress = c.mqadmin_batch(
        [
            ["updateSubGroup", "-c", rc.CLUSTER_NAME, "-g", group, "-r", "3"],
            ["clusterList"],
            ["consumerProgress", "-g", group],
        ]
    )
    assert "success" in out_group.lower()
    assert emu.cluster.group_config(group).max_retries == 3
    line = next(x for x in out_cluster.splitlines() if "broker-a" in x)
    assert rc.CLUSTER_NAME in line and c.broker_addr in line and "true" in line
    assert rc.diff_total(out_progress) == 0, out_progress

    # Back to the time before the second round: 8 messages to consume again.
    out_reset = c.mqadmin("resetOffsetByTime", "-g", group, "-t", topic, "-s", str(before_second))
    assert "broker-a" in out_reset, out_reset
    out_progress = c.mqadmin("consumerProgress", "-g", group)
    assert rc.diff_total(out_progress) == 8, out_progress
    rc.evidence(
        "mqadmin against the emulator: updateSubGroup, clusterList, consumerProgress, resetOffsetByTime ok"
    )
