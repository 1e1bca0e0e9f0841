import test_comment as t
def test_x(make_case, make_run):
    ctx = t.fail_context(make_case, make_run)
    text = t.render_comment(ctx, max_chars=1000)
    print(text)
