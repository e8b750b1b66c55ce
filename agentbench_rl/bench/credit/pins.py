"""The sha256 of each standard credit set's arrays (``set.npz``), pinned in the code.

A set's ``set.json`` records its arrays' sha256, which catches a damaged or swapped file but not
a changed one sealed again (arrays edited, the sha256 in ``set.json`` rewritten): a standard set
whose arrays are not its pin is refused. A new standard set is pinned here in the commit that
ships it; ``tests/bench/test_credit.py`` checks every shipped set against its pin. A set of
one's own is read unpinned, and ``bench credit``'s card says so.
"""

from __future__ import annotations

PINS: dict[str, str] = {
    "alfworld-drrn-mid": "84182ca5dc88c15403a1f09a871397a17b31b5f3faef88808403c089b42c6c31",
    "alfworld-drrn-start": "31645e5c37ab1d42025e50040428b49c471a645c6c3d1599424c0ad536b74229",
    "alfworld-seen-undo-expert": "bfbf6220f2d4f34ab4bd754e272d5a6c4045790156108d68d67032e977e3ec69",
    "alfworld-tiny": "88b61cca78caffeb5edd9f5e9b2e4721933330e1c448fae73b34be7c9b163c16",
    "alfworld-unseen-undo-expert": (
        "c7d3e372966288e9da11a6072c1f3e672839d30da2ef41de72c71523dea7928c"
    ),
    "mdp-aliased": "8585476018af98c492c5c9fe66562311e8b453ee19f264100614af21d75bbbfb",
    "mdp-branching": "97008a07e8a838425b3fb9234765e30dbf926a6ee30da355f6d8b6cbbeb6054f",
    "mdp-dense-anchors": "39267d3b70dac7042848f1f7427f117fa7647187bcbed4c5e9e885547aa4f56e",
    "mdp-detours": "671765f79f5166d549d3bfdf1a672742704af96440513b0d37aacaf5508df8ad",
    "mdp-history-credit": "0a828cd3fca3cbd6af316000e7f67557c4da7c9868d41bfaf1263a6cdd27e6c1",
    "mdp-lucky-rare": "f275667d8e5c8a58d3cab861ff40e2e50b7b12742c3e5c8bf82ecbb64cbffea1",
    "mdp-recent-cue": "0c5a07a9b2695ac1ba9e804f23776e680d55214b96181c259e71f04da635f90c",
    "mdp-sparse-anchors": "3faa70e5eeb3240cf8efa6fa559ebbfe1f630ff57c00a0264cdbfa271f6b7eff",
    "sokoban-bc-start": "f52fbaa1ccab086866e7007ca42b0519ef90ff28b17ad050474415b130d5ba03",
    "sokoban-drrn-start": "1c4a94ce5f0f87298859bfe2dd1f97e2c17b10e56428cdd5b8b8dc8ec4871334",
    "sokoban-drrn-mid": "d3e16dadcae578df00783b6fb86153ff197ea0d6406160fd014d6a9ac35c9361",
    "sokoban-gigpo-final": "8e0ad05baf44731b9ca1ccdd6256f0c2b7666dcbd9e2055bf8ce3a2a7d3f197f",
    "textcraft-drrn-mid": "1104f3b65526daf58d46144fd223eb5951e434915fc65909a2c589eb0f3fd81d",
    "textcraft-drrn-start": "893807ca81d4b64fd2e12a8e3c9afe85b9dd9897bd3b331080a01861db4c8ab2",
    "textcraft-noisy0.6-expert": "53548ce213427829f9c1abf6602303a5f14daa2bffaf08695ab090213ee94171",
    "textcraft-noisy0.9-expert": "4b7b5e1ba2ddd12308476bf845c9541eb2d7c2480a10191229b072b6f9014866",
    "textcraft-noisy0.95-expert": (
        "bfeee59aa5d954b77fe1ff6b77652d4f89f1207660521d8991a12d20576f98ed"
    ),
    "textcraft-tiny": "395952132fc0b854cdf0b602798baf866657e3b8eaadd4d9494379f96274588a",
    "webshop-noisy0.3-expert": "e63e7ec0b06c171ea60143f963bf97020153fd34ca5563a2509b7799ece227c0",
    "webshop-noisy0.3-rule": "4d9a1e6a813568cadd378f0267e026dc7dda8d8bc48c2fa4fd17fd0fcca94967",
    "webshop-noisy0.6-expert": "08180c4c932c0c4c82d081dd2d372995a8990c26def31cc48a5ff03738aaa562",
    "webshop-tiny": "9525c8713a3e3e2f63a3071d49e630b1d570dac4188f76b50e2aa837940f0a65",
}
