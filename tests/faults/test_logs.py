"""Reading fault and incident logs; the shipped InfiniteHBD part and its statistics."""

import json

import numpy as np
import pytest

import markovsim
from markovsim import DAY, HOUR, SpecError
from markovsim.availability import (INFINITEHBD_WINDOW, dispersion_index, infinitehbd_trace, read_fault_log,
                                    read_incident_log)


def test_trace_facts_from_its_readme():
    log = infinitehbd_trace()
    assert log.nodes == 400 and log.window == pytest.approx(209.39 * DAY)
    # 690 events: 349 starts, 341 ends; the 8 faults open at the cut are censored
    assert log.n_faults == 349 and int(log.censored.sum()) == 8
    assert len(log.node_names) == 175                              # nodes that never failed do not appear
    assert np.all(log.end[log.censored] == INFINITEHBD_WINDOW)
    assert log.max_nodes_down() == 35                              # 8.75 % of 400 (the figure)
    # up time = node-days minus the downtime of every fault (no node had two faults at once)
    assert log.exposure() == pytest.approx(400 * INFINITEHBD_WINDOW - log.duration.sum())


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_records_with_units_in_column_names(tmp_path):
    p = _write(tmp_path, "log.csv", "node,start_h,end_h,class\nA,1,3,GPU\nB,2,,NIC\nA,5,6,GPU\n")
    log = read_fault_log(p, nodes=4, window=10 * HOUR)
    assert log.n_faults == 3 and log.classes == ("GPU", "NIC")
    assert log.censored.tolist() == [False, True, False]           # B open at the end
    assert log.duration.tolist() == pytest.approx([2 * HOUR, 8 * HOUR, HOUR])
    assert log.per_node_counts().tolist() == [2, 1, 0, 0]
    assert log.exposure() == pytest.approx(4 * 10 * HOUR - 11 * HOUR)


def test_json_event_layout_pairs_ends_with_starts(tmp_path):
    ev = [{"node_id": "n1", "event_time": 1.0, "event_type": "fault_start", "fault_type": {"Class": "GPU"}},
          {"node_id": "n1", "event_time": 1.5, "event_type": "fault_end", "fault_type": {"Class": "GPU"}},
          {"node_id": "n2", "event_time": 2.0, "event_type": "fault_start", "fault_type": {"Class": "Fan"}}]
    log = read_fault_log(_write(tmp_path, "t.json", json.dumps(ev)), nodes=3, window=3 * DAY, time_unit="d")
    assert log.n_faults == 2 and log.censored.tolist() == [False, True]
    assert log.duration[0] == pytest.approx(0.5 * DAY)


@pytest.mark.parametrize("text,match", [
    ("node,start,end,class\nA,1,2,GPU\n", "time_unit"),                       # no unit anywhere
    ("node,start_h,end_h,class\nA,x,2,GPU\n", r"\[0\]\.start_h='x'"),          # bad number, named
    ("node,start_h,end_h\nA,1,2\n", r"\[0\]\.class"),                          # missing field
    ("node,start_h,end_h,class\nA,20,21,GPU\n", "window end"),                 # start after the window
])
def test_bad_fault_logs_name_the_field(tmp_path, text, match):
    with pytest.raises(SpecError, match=match):
        read_fault_log(_write(tmp_path, "bad.csv", text), nodes=2, window=10 * HOUR)


def test_end_without_start_is_an_error(tmp_path):
    ev = [{"node_id": "n1", "event_time": 1.0, "event_type": "fault_end", "fault_type": {"Class": "GPU"}}]
    with pytest.raises(SpecError, match="without an open fault_start"):
        read_fault_log(_write(tmp_path, "t.json", json.dumps(ev)), nodes=1, window=DAY, time_unit="d")


def test_nodes_fewer_than_seen_is_refused(tmp_path):
    p = _write(tmp_path, "log.csv", "node,start_h,end_h,class\nA,1,3,GPU\nB,2,3,NIC\n")
    with pytest.raises(markovsim.InvalidParameterError, match="nodes=1"):
        read_fault_log(p, nodes=1, window=10 * HOUR)


def test_incident_log_and_running_time(tmp_path):
    p = _write(tmp_path, "inc.csv", "time_d,cause,downtime_min\n0.5,gpu,30\n2.0,nic,60\n")
    inc = read_incident_log(p, window=3 * DAY, cards=64)
    assert inc.n_incidents == 2 and inc.cause_counts() == {"gpu": 1, "nic": 1}
    assert inc.running_time() == pytest.approx(3 * DAY - 90 * 60)


def test_split_and_truncate_keep_every_fault():
    log = infinitehbd_trace()
    cut = 100 * DAY
    later, node, end = log.after(cut)
    early = log.truncated(cut)
    assert early.n_faults + later.n_faults == log.n_faults
    # faults open at the cut are censored in the truncated log and carried into the later window
    assert int(early.censored.sum()) >= node.size and np.all(end > 0)


def test_dispersion_index_of_poisson_counts_is_one():
    rng = np.random.default_rng(0)
    d = dispersion_index(rng.poisson(3.0, 20000))
    assert d == pytest.approx(1.0, abs=0.05)          # sd of the estimate ~ sqrt(2/n) = 0.01
