import time, cProfile, pstats
from test_comment import render_comment
import test_comment as t
import evalgate.report.comment as cm


def test_prof(make_case, make_run):
    b, c = t.make_pair(
        make_case,
        make_run,
        n=5400,
        broken=range(0, 5000),
        fixed=range(5000, 5300),
        unstable=range(5300, 5340),
        errored=range(5340, 5380),
        messages=lambda i, _: f"{t.LONG}(message {i}) " * 3,
        categories=[f"topic-{k:02d}" for k in range(30)],
    )
    ctx = t.context(b, c)
    calls = []
    orig = cm._Part.draw

    def draw(self, k):
        t0 = time.time()
        r = orig(self, k)
        calls.append((self.title, k, len(r), round(time.time() - t0, 3)))
        return r

    cm._Part.draw = draw
    pr = cProfile.Profile()
    pr.enable()
    out = render_comment(ctx)
    pr.disable()
    for x in calls:
        print(x)
    pstats.Stats(pr).sort_stats("tottime").print_stats(10)
