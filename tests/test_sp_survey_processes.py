"""A survey of 50 respondent estates in real processes on loopback returns all 50 in time.

The 50 estates are one helper process (``python -m raetlike.swarm``: 50 road
stacks, 50 UDP sockets, one loop); this test process is the surveying main
estate.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

from raetlike.swarm import SurveyHub

ROOT = Path(__file__).resolve().parent.parent
COUNT = 50
SURVEY_TIME = 10.0


def test_a_survey_of_fifty_respondent_estates_returns_all_fifty_before_the_deadline() -> None:
    hub = SurveyHub("hub", survey_time=SURVEY_TIME)
    host, port = hub.address
    swarm = subprocess.Popen(
        [sys.executable, "-m", "raetlike.swarm", "--count", str(COUNT), "--join",
         f"{host}:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    try:
        assert swarm.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(swarm.stdout, selectors.EVENT_READ)
            assert selector.select(10.0), "the swarm printed nothing"
        assert swarm.stdout.readline().decode().strip() == f"swarm {COUNT} estates"
        assert hub.wait_for(COUNT, timeout=20.0), f"only {len(hub.channels)} joined"

        responses, elapsed, in_time = hub.survey({"q": "who"}, COUNT, timeout=SURVEY_TIME + 1)
        assert in_time, f"{len(responses)} responses when the survey ended"
        assert elapsed < SURVEY_TIME
        assert sorted(r.body["estate"] for r in responses) == sorted(
            f"r{index}" for index in range(COUNT))
        assert all(r.body["survey"] == {"q": "who"} for r in responses)
        assert {r.channel_name for r in responses} == hub.channels
    finally:
        hub.close()
        swarm.send_signal(signal.SIGTERM)
        try:
            assert swarm.wait(timeout=10) == 0, swarm.stderr.read() if swarm.stderr else ""
        finally:
            if swarm.poll() is None:
                swarm.kill()
                swarm.wait()
