"""Tile operations inside `T.ws` regions on the thread lowering (cuda, emu).

A `T.ws(g...)` region of contiguous warpgroups is lowered as a kernel of its own `n` threads
(128 per warpgroup) that shares the block's shared memory: its fragments get layouts inferred
over those `n` threads, its thread index is `tx - 128 * g0` (a `LetStmt` at the top of the
region), and the barriers its tile operations need are named barrier `8 + g0` over its `n`
threads (`insert_role_barriers`), never the block barrier the other roles would not reach.
A fragment belongs to one role: used by two roles, or by a role and the rest of the block, it is
a located TileShapeError. Gemms inside roles are asked of the target with the block's thread
count only, so they lower to SIMT multiply-adds (a performance note says so); tensor cores for
roles need the role's thread count in the gemm queries.
"""

from __future__ import annotations

from ..errors import TileShapeError
from ..ir.buffer import Buffer
from ..ir.expr import binop
from ..ir.stmt import KernelLaunch, LetStmt, SeqStmt, Stmt
from ..ir.thread_level import WARPGROUP, WarpRole
from ..ir.visit import walk
from .barrier import insert_role_barriers
from .context import LowerCtx
from .infer import infer_layouts
from .smem import planner

ROLE_BARRIER_BASE = 8  # named barriers 8..15 (one per first warpgroup of a role); 1..7 stay free


class RoleCtx(LowerCtx):
    """The lowering context of one role: its own threads, thread variable and fragment
    layouts; shared memory, registers and names are the block's (`parent`'s)."""

    def __init__(self, parent: LowerCtx, launch: KernelLaunch, layouts, plans):
        super().__init__(launch, parent.desc, layouts, plans)
        self.parent = parent
        self.thread_level = True
        self.var_bounds = parent.var_bounds
        self._shared, self.shared_list = parent._shared, parent.shared_list
        self._regs, self.reg_list = parent._regs, parent.reg_list
        self._scratch, self._names = parent._scratch, parent._names
        self._smem_planner = planner(parent)  # one placement of shared memory (staging tiles too)

    def shared(self, buf: Buffer) -> Buffer:
        """The block's flat storage of `buf` (one layout for every role)."""
        return self.parent.shared(buf)

    def has_shared(self, buf: Buffer) -> bool:
        """Whether the block allocated `buf` already."""
        return self.parent.has_shared(buf)

    def smem_layout(self, buf: Buffer):
        """The block's layout of `buf`."""
        return self.parent.smem_layout(buf)


def _fragments(node) -> set:
    return {id(n) for n in walk(node) if isinstance(n, Buffer) and n.scope == "fragment"}


def check_role_fragments(launch: KernelLaunch) -> None:
    """Each fragment is used by one `T.ws` region's warpgroups only, or outside every region."""
    owner: dict[int, tuple] = {}
    names = {id(b): b.name for b in launch.allocs}

    def visit(s, role):
        if isinstance(s, WarpRole):
            role = s.groups
        elif not isinstance(s, SeqStmt) and not any(isinstance(n, WarpRole) for n in walk(s)):
            for f in _fragments(s):
                prev = owner.setdefault(f, (role, s.loc))
                if prev[0] != role:
                    def who(r):
                        return f"T.ws{r}" if r is not None else "code outside the T.ws regions"
                    raise TileShapeError(
                        f"fragment {names.get(f, '?')} is used by {who(role)} and by {who(prev[0])} "
                        f"(line {prev[1].line if prev[1] else '?'}): a fragment lives in one role's "
                        "registers", s.loc,
                        hint="give each role its own fragment, or pass the values through shared memory")
            return
        for x in (s.stmts if isinstance(s, SeqStmt) else (s.body,) if hasattr(s, "body") else ()):
            visit(x, role)
        for side in ("then_body", "else_body"):
            if getattr(s, side, None) is not None:
                visit(getattr(s, side), role)

    visit(launch.body, None)


def _role_layouts(ctx: LowerCtx, groups: tuple, n: int):
    """(the role's launch, fragment layouts, gemm plans), inferred once over every region of
    the kernel for `groups` (a fragment keeps one layout across the role's regions)."""
    cache = ctx.__dict__.setdefault("_role_layouts", {})
    if groups not in cache:
        launch = ctx.launch
        body = getattr(ctx, "role_body", launch.body)
        regions = tuple(r.body for r in walk(body) if isinstance(r, WarpRole) and tuple(r.groups) == groups)
        sub = KernelLaunch(launch.grid, launch.block_vars, (n,), launch.allocs, SeqStmt(regions, launch.loc),
                           (), launch.loc)
        layouts, plans = infer_layouts(sub, ctx.desc)
        cache[groups] = (sub, layouts, plans)
    return cache[groups]


def lower_role(ctx: LowerCtx, s: WarpRole, lower_block) -> Stmt:
    """The body of role `s` lowered as its own threads (module docstring), for `if` on its
    warpgroups (the caller wraps it)."""
    groups = tuple(s.groups)
    if list(groups) != list(range(groups[0], groups[0] + len(groups))):
        raise TileShapeError(f"T.ws{groups}: a region with tile operations needs consecutive "
                             "warpgroups (its threads are numbered from the first)", s.loc,
                             hint="write one T.ws region per run of consecutive warpgroups")
    base, n = WARPGROUP * groups[0], WARPGROUP * len(groups)
    sub, layouts, plans = _role_layouts(ctx, groups, n)
    rctx = RoleCtx(ctx, sub, layouts, plans)
    rctx.tx = ctx.fresh_var("tx_role")
    body = lower_block(rctx, s.body)
    if not ctx.options.disable_thread_storage_sync:
        body = insert_role_barriers(body, rctx.tx, n, ROLE_BARRIER_BASE + groups[0])
    head = LetStmt(rctx.tx, ctx.simp(binop("sub", ctx.tx, base)), s.loc)
    return SeqStmt((head, body), s.loc)
