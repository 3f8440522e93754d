"""C++ text stages and the preprocessor, on the CPU (GCC) and a GPU (NVRTC): a macro a stage defines ends
with that stage however its directive is spelled (comments, digraphs, line splices, form feeds); a
guarded or commented-out #define leaves resident's own macro as it was; a stage that changes a macro
defined before it, or uses the names resident keeps for its markers, is refused at that line; nothing is
inserted into a raw string, and line numbers hold after a comment."""
import numpy as np
import pytest

import resident as rs
from _support import DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_a_macro_a_stage_defines_ends_with_that_stage(device):
    # `#define sqrtf(x) (x)` in a C++ stage made the built-in square root after it the identity.
    x = rs.to_device(np.array([4.0, 9.0], np.float32), device=device)
    chain = rs.stage("#define sqrtf(x) (x)\n#define K 2.0f\nfloat twice(float v) { return v * K; }") | rs.op.sqrt()
    np.testing.assert_allclose(chain(x, out=rs.empty(2, device=device)).to_host(), np.sqrt([8.0, 18.0]), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_define_a_stage_skips_or_comments_out_leaves_the_macro_as_it_was(device):
    # RESIDENT_HD: the prelude's macro for stage text on both targets; a header's `#ifndef` idiom or a
    # commented-out `#define` must not take it from the stages after.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    guarded = rs.stage("#ifndef RESIDENT_HD\n#define RESIDENT_HD\n#endif\n"
                       "RESIDENT_HD float twice(float v) { return 2.0f * v; }")
    commented = rs.stage("/*\n#define RESIDENT_HD\n*/\nfloat same(float v) { return v; }")
    uses = rs.stage("RESIDENT_HD float plus_one(float v) { return v + 1.0f; }")
    got = (guarded | commented | uses)(x, out=rs.empty(2, device=device)).to_host()
    np.testing.assert_array_equal(got, np.array([3.0, 5.0], np.float32))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("text", ["#undef RESIDENT_HD\n#define RESIDENT_HD\nfloat f(float v) { return v; }",
                                  "#define RESIDENT_HD __host__\nfloat f(float v) { return v; }",
                                  "#ifdef RESIDENT_HD\n#undef RESIDENT_HD\n#endif\nfloat f(float v) { return v; }"])
def test_a_stage_that_changes_a_macro_defined_before_it_is_refused_at_that_line(device, text):
    # Without push_macro (NVRTC) the macro could not be restored for the stages after: refused, not leaked.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    with pytest.raises(rs.CompileError, match=r"stage 1(:[12]:|\([12]\)).*#(undef|define)s RESIDENT_HD, a macro defined"):
        rs.stage(text)(x)
    np.testing.assert_array_equal(x.to_host(), [1.0, 2.0])
    # A stage's own macros, redefined in it, end with it: the next stage may define the name again.
    first = rs.stage("#define K 3.0f\nfloat g(float v) { return v * K; }\n#undef K\n#define K 5.0f")
    then = rs.stage("#define K 2.0f\nfloat h(float v) { return v + K; }")
    np.testing.assert_array_equal((first | then)(x).to_host(), [5.0, 8.0])


_S = "float s(float v) { return v; }"


_AFTER = "float r(float v) { return sqrtf(v) + 1.0f; }"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("text", ["#define/**/sqrtf(v) v\n", "/**/#define sqrtf(v) v\n", "%:define sqrtf(v) v\n",
                                  "#def\\\nine sqrtf(v) v\n", "#define \\\nsqrtf(v) v\n", "#define\fsqrtf(v) v\n",
                                  "#define sqrtf(v) \\ \n v\n", "#define sqrtf(v) v /* a comment\n over lines */\n"],
                         ids=["comment-inside", "comment-before", "digraph", "spliced-name", "spliced-argument",
                              "form-feed", "splice-after-blank", "comment-across-lines"])
def test_a_macro_however_spelled_ends_with_its_stage(device, text):
    # The directives are found as the preprocessor finds them: each spelling made sqrtf the identity after.
    x = rs.to_device(np.array([4.0, 9.0], np.float32), device=device)
    if device != "cpu" and "\\ \n" in text:  # a blank after the backslash: a splice to GCC, not to NVRTC
        with pytest.raises(rs.CompileError):
            (rs.stage(text + _S) | rs.stage(_AFTER))(x)
        return
    got = (rs.stage(text + _S) | rs.stage(_AFTER))(x).to_host()
    np.testing.assert_allclose(got, [3.0, 4.0], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_nothing_is_inserted_into_a_raw_string_and_line_numbers_hold_after_a_comment(device):
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    text = 'float n(float v) { const char* s = R"(\n#define Q 1\n)"; int k = 0; while (s[k]) ++k; return v + k; }'
    np.testing.assert_array_equal(rs.stage(text)(x).to_host(), [14.0, 15.0])  # 13 characters, none added
    bad = "#define K 2.0f /* doubling\n factor */\nfloat t(float v) { return v * K; }\nfloat u(float v) { return nope; }"
    with pytest.raises(rs.CompileError, match=r"stage 1(:4:|\(4\))"):
        rs.stage(bad, name="t")(x)


@pytest.mark.parametrize("device", DEVICES)
def test_the_markers_names_are_kept_from_stages(device):
    # A stage naming the marker could have kept its redefinition of an earlier macro for the stages after.
    x = rs.to_device(np.array([1.0, 2.0], np.float32), device=device)
    with pytest.raises(rs.CompileError, match="RS_NEW_MACRO_, which resident keeps for itself"):
        rs.stage("#define RS_NEW_MACRO_0_K\n" + _S)(x)
