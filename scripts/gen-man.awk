# gen-man.awk -- include/librpma.h's manual blocks to man pages (roff, man macros).
# Run by scripts/gen-man.sh, which documents the block format; POSIX awk (mawk, gawk).
# Variables: out (directory with man3/ and man7/), version, cxx_headers (space-separated
# include/arpma/*.hpp paths), include_dir.

function trim(s) {
  sub(/^[ \t]+/, "", s)
  sub(/[ \t]+$/, "", s)
  return s
}

function blank(s) { return s ~ /^[ \t]*$/ }

function squeeze(s) {
  gsub(/[ \t]+/, " ", s)
  return trim(s)
}

function capitalize(s) { return toupper(substr(s, 1, 1)) substr(s, 2) }

function with_period(s) {
  s = trim(s)
  if (s !~ /[.!?]$/) s = s "."
  return s
}

# The first sentence of s: up to ". ", ": " or "; " outside parentheses.
function first_sentence(s,    i, c, d, n) {
  d = 0
  n = length(s)
  for (i = 1; i <= n; i++) {
    c = substr(s, i, 1)
    if (c == "(") d++
    else if (c == ")") d--
    else if (d == 0 && (c == "." || c == ":" || c == ";") && (i == n || substr(s, i + 1, 1) == " "))
      return substr(s, 1, i - 1)
  }
  return s
}

# Roff text line: escape backslashes, keep a leading dot or quote literal, and set the
# names of documented functions in bold.
function roff(s,    o, name, pre) {
  gsub(/\\/, "\\e", s)
  o = ""
  while (match(s, /rpma_[a-z0-9_]+(\(\))?/)) {
    pre = substr(s, 1, RSTART - 1)
    name = substr(s, RSTART, RLENGTH)
    s = substr(s, RSTART + RLENGTH)
    sub(/\(\)$/, "", name)
    if (name in proto) o = o pre "\\fB" name "\\fP()"
    else o = o pre name
  }
  o = o s
  if (o ~ /^[.']/) o = "\\&" o
  return o
}

# A declaration laid out for a .nf block: continuation lines aligned after "(" (or
# indented by 4 when that column is far right), lines filled up to `width` characters.
function layout(decl, width,    head, rest, col, ind, line, o, p, n, i, parts, piece) {
  i = index(decl, "(")
  if (i == 0) return decl
  head = substr(decl, 1, i)
  rest = substr(decl, i + 1)
  col = length(head)
  if (col > 36) col = 4
  ind = sprintf("%" col "s", "")
  n = split(rest, parts, ", ")
  line = head
  o = ""
  for (p = 1; p <= n; p++) {
    piece = parts[p] (p < n ? "," : "")
    if (line != head && line != ind && length(line) + 1 + length(piece) > width) {
      o = o line "\n"
      line = ind piece
    } else if (line == head || line == ind) {
      line = line piece
    } else {
      line = line " " piece
    }
  }
  return o line
}

# Splits block b into its parts (once): entries of the header paragraph (names and text),
# description paragraphs, RETURN VALUE (lead text and RPMA_E_* items) and the C++ line.
function parse_block(b,    l, t, st, k, i, np, newpara, code, seg, s, rest) {
  if (b in parsed) return
  parsed[b] = 1
  nent[b] = 0
  npara[b] = 0
  nerr[b] = 0
  rlead[b] = ""
  hasret[b] = 0
  cxx[b] = ""
  st = 0
  newpara = 1
  for (l = 1; l <= bl[b]; l++) {
    t = bl[b, l]
    if (t ~ /^C\+\+: /) {
      cxx[b] = squeeze(cxx[b] " " substr(t, 6))
      continue
    }
    if (t ~ /^RETURN VALUE:/) {
      st = 2
      hasret[b] = 1
      rlead[b] = trim(substr(t, 14))
      continue
    }
    if (st == 0) {
      if (blank(t)) {
        st = 1
        newpara = 1
        continue
      }
      if (t ~ /^[a-z_][a-z0-9_]*( \/ [a-z0-9_]+)* -- /) {
        k = ++nent[b]
        i = index(t, " -- ")
        en[b, k] = substr(t, 1, i - 1)
        gsub(/ \/ /, " ", en[b, k])
        et[b, k] = trim(substr(t, i + 4))
      } else if (nent[b] > 0) {
        et[b, nent[b]] = et[b, nent[b]] " " trim(t)
      } else {
        st = 1
      }
      if (st == 0) continue
    }
    if (st == 1) {
      if (blank(t)) {
        newpara = 1
        continue
      }
      if (newpara) {
        np = ++npara[b]
        para[b, np] = trim(t)
        newpara = 0
      } else {
        para[b, np] = para[b, np] " " trim(t)
      }
      continue
    }
    # RETURN VALUE
    if (blank(t)) continue
    if (t ~ /^- RPMA_E_[A-Z_]+ - /) {
      k = ++nerr[b]
      t = substr(t, 3)
      i = index(t, " - ")
      ecode[b, k] = substr(t, 1, i - 1)
      etext[b, k] = trim(substr(t, i + 3))
    } else if (nerr[b] > 0) {
      etext[b, nerr[b]] = etext[b, nerr[b]] " " trim(t)
    } else {
      rlead[b] = rlead[b] " " trim(t)
    }
  }
  rlead[b] = squeeze(rlead[b])
  # Inline codes: "0, or RPMA_E_INVAL (cfg_ptr NULL), RPMA_E_NOMEM."
  if (nerr[b] == 0 && rlead[b] ~ /RPMA_E_/) {
    inline_err[b] = 1
    s = rlead[b]
    while (match(s, /RPMA_E_[A-Z_]+/)) {
      code = substr(s, RSTART, RLENGTH)
      rest = substr(s, RSTART + RLENGTH)
      if (match(rest, /RPMA_E_[A-Z_]+/)) {
        seg = substr(rest, 1, RSTART - 1)
        s = substr(rest, RSTART)
      } else {
        seg = rest
        s = ""
      }
      seg = trim(seg)
      while (seg ~ /(,|\.|;| or|^or)$/) {
        sub(/(,|\.|;| or|^or)$/, "", seg)
        seg = trim(seg)
      }
      if (seg ~ /^\(.*\)$/ && index(substr(seg, 2), "(") == 0) seg = substr(seg, 2, length(seg) - 2)
      sub(/^(when|for|if) /, "", seg)
      k = ++nerr[b]
      ecode[b, k] = code
      etext[b, k] = seg
    }
  }
}

# The entry of block b that documents function f (0: none).
function entry_of(b, f,    k, n, i, names) {
  for (k = 1; k <= nent[b]; k++) {
    n = split(en[b, k], names, " ")
    for (i = 1; i <= n; i++) {
      if (names[i] == f) return k
      if (substr(names[i], 1, 1) == "_" && length(f) > length(names[i]) &&
          substr(f, length(f) - length(names[i]) + 1) == names[i])
        return k
    }
  }
  return nent[b] == 1 ? 1 : 0
}

# The last parameter's name of a prototype ("" when none).
function last_param(p,    s) {
  s = p
  sub(/\).*$/, "", s)
  sub(/^.*[ *]/, "", s)
  return s
}

# Lines of every C++ header, read once.
function load_cxx(    n, i, f, line, files) {
  if (cxx_loaded) return
  cxx_loaded = 1
  n = split(cxx_headers, files, " ")
  ncxxf = 0
  for (i = 1; i <= n; i++) {
    f = files[i]
    ncxxf++
    cxxf[ncxxf] = f
    hl[ncxxf] = 0
    while ((getline line < f) > 0) hline[ncxxf, ++hl[ncxxf]] = line
    close(f)
  }
}

# The declarations of C++ function `name` (member of class `cls` when not empty) in the
# C++ headers, laid out, with the header and completion signatures found in their doc
# comments. Sets cxx_where, cxx_sig; returns the declarations ("" when none).
function cxx_decls(cls, name,    h, l, t, d, j, doc, k, o, has_cls, sig) {
  load_cxx()
  o = ""
  cxx_where = ""
  cxx_sig = ""
  for (h = 1; h <= ncxxf; h++) {
    has_cls = 1
    if (cls != "") {
      has_cls = 0
      for (l = 1; l <= hl[h]; l++)
        if (hline[h, l] ~ ("^(class|struct) " cls "( |$)")) has_cls = 1
    }
    if (!has_cls) continue
    for (l = 1; l <= hl[h]; l++) {
      t = hline[h, l]
      if (t ~ /^[ \t]*\/\//) continue
      if (t !~ ("(^|[^A-Za-z0-9_:])" name "\\(")) continue
      # A declaration starts at an indentation of at most 2 with a type, not a statement.
      if (t !~ /^  ?[^ ]/ && t !~ /^[^ ]/) continue
      if (t ~ /^[ \t]*(return|if|for|while|detail::)/) continue
      d = t
      j = l
      while (d !~ /;[ \t]*$/ && d !~ /\{[ \t]*$/ && j < hl[h]) d = d " " hline[h, ++j]
      sub(/[ \t]*\{[ \t]*$/, ";", d)
      d = squeeze(d)
      # The doc comment above (a template line between is part of the declaration).
      k = l - 1
      if (k >= 1 && hline[h, k] ~ /^[ \t]*template </) {
        d = squeeze(hline[h, k]) "\n" d
        k--
      }
      doc = ""
      while (k >= 1 && hline[h, k] ~ /^[ \t]*\/\/\//) {
        doc = trim(substr(trim(hline[h, k]), 4)) " " doc
        k--
      }
      if (match(doc, /Completion signature: `[^`]*`/)) {
        sig = substr(doc, RSTART + 23, RLENGTH - 24)
        cxx_sig = sig
      }
      if (index(d, "\n")) o = o substr(d, 1, index(d, "\n")) layout(substr(d, index(d, "\n") + 1), 72) "\n"
      else o = o layout(d, 72) "\n"
      cxx_where = substr(cxxf[h], length(include_dir) + 2)
    }
  }
  return o
}

function see_also_add(f, g) {
  if (g == f || (f SUBSEP g) in seen_also) return
  seen_also[f, g] = 1
  also[f, ++nalso[f]] = g
}

function write_page(f,    b, k, file, p, i, n, brief, text, sib, tok, cls, name, decls, g,
                    s, sibs, last, lead, def, word, words, nw, ty) {
  b = fblk[f]
  file = out "/man3/" f ".3"
  k = 0
  if (b > 0) {
    parse_block(b)
    k = entry_of(b, f)
  }
  if (k == 0) {
    print "gen-man: warning: " f " has no manual block in the header; page made from its prototype" > "/dev/stderr"
    text = ""
    brief = "function of the librpma C API"
  } else {
    text = squeeze(et[b, k])
    brief = first_sentence(text)
    sub(/\.$/, "", brief)
  }

  print ".\\\" Generated by scripts/gen-man.sh from include/librpma.h; do not edit." > file
  print ".TH " toupper(f) " 3 \"\" \"arpma " version "\" \"arpma\"" > file
  print ".SH NAME" > file
  print f " \\- " roff_plain(brief) > file

  # SYNOPSIS: the include, the types the prototype uses, the macros the text names.
  print ".SH SYNOPSIS" > file
  print ".nf" > file
  print ".B #include <librpma.h>" > file
  print ".PP" > file
  s = fproto[f]
  delete shown
  while (match(s, /struct [a-z_0-9]+/)) {
    ty = substr(s, RSTART + 7, RLENGTH - 7)
    s = substr(s, RSTART + RLENGTH)
    if (ty in shown) continue
    shown[ty] = 1
    if (ty in sdef) print sdef[ty] > file
    else print "struct " ty ";" > file
  }
  s = fproto[f]
  while (match(s, /enum [a-z_0-9]+/)) {
    ty = substr(s, RSTART + 5, RLENGTH - 5)
    s = substr(s, RSTART + RLENGTH)
    if (("enum " ty) in shown || !(ty in edef)) continue
    shown["enum " ty] = 1
    print edef[ty] > file
  }
  for (ty in tdef) if (index(fproto[f], ty)) print tdef[ty] > file
  if (k > 0) {
    nw = split(et[b, k] " " blocktext[b], words, /[^A-Z0-9_]+/)
    for (i = 1; i <= nw; i++) {
      word = words[i]
      if (word in ddef && word !~ /^RPMA_E_/ && !(("def " word) in shown)) {
        shown["def " word] = 1
        print ddef[word] > file
      }
    }
  }
  print ".PP" > file
  s = layout(fproto[f], 72)
  sub(f "\\(", "\\fB" f "\\fP(", s)
  print s > file
  print ".fi" > file

  # DESCRIPTION
  print ".SH DESCRIPTION" > file
  if (k > 0) {
    print roff(with_period(capitalize(text))) > file
    # A setter/getter family documented together: say which does what.
    n = split(en[b, k], sibs, " ")
    if (n >= 2) {
      for (i = 1; i <= nfn; i++) {
        g = fn[i]
        if (g == f || fblk[g] != b || entry_of(b, g) != k) continue
        if (f ~ /_set_/ && g == gensub_set_get(f, "_set_", "_get_")) {
          print ".PP" > file
          print roff(f "() sets the value; " g "() stores it in *") "\\fI" last_param(fproto[g]) "\\fP." > file
        } else if (f ~ /_get_/ && g == gensub_set_get(f, "_get_", "_set_")) {
          print ".PP" > file
          print roff(g "() sets the value; " f "() stores it in *") "\\fI" last_param(fproto[f]) "\\fP." > file
        }
      }
    }
    for (p = 1; p <= npara[b]; p++) {
      print ".PP" > file
      print roff(with_period(para[b, p])) > file
    }
  } else {
    print "See the declaration in <librpma.h>." > file
  }

  # RETURN VALUE and ERRORS
  print ".SH RETURN VALUE" > file
  if (k > 0 && hasret[b]) {
    lead = rlead[b]
    if (nerr[b] > 0 && !inline_err[b]) {
      if (lead ~ /or:$/) sub(/or:$/, "or a negative error code listed under ERRORS.", lead)
      else if (lead ~ /:$/) sub(/:$/, ". On failure it returns a negative error code listed under ERRORS.", lead)
    }
    print roff(f "() returns " with_period(lead)) > file
  } else if (k > 0 && fproto_ret[f] !~ /^int$/) {
    print roff(f "() returns " with_period(text)) > file
  } else {
    print roff(f "() returns 0 on success or a negative RPMA_E_* error code.") > file
  }
  print ".SH ERRORS" > file
  if (k > 0 && nerr[b] > 0) {
    print roff(f "() can fail with the following errors:") > file
    for (i = 1; i <= nerr[b]; i++) {
      print ".TP" > file
      print ".B " ecode[b, i] > file
      def = etext[b, i]
      if (def == "") def = errdesc[ecode[b, i]]
      print roff(with_period(def)) > file
    }
  } else {
    print "None." > file
  }

  # The C++ counterpart the block names.
  if (k > 0 && cxx[b] != "") {
    print ".SH C++ API" > file
    print roff("The same operation in arpma's C++20 API: " with_period(cxx[b])) > file
    s = cxx[b]
    while (match(s, /arpma::[A-Za-z0-9_:]+/)) {
      tok = substr(s, RSTART, RLENGTH)
      s = substr(s, RSTART + RLENGTH)
      sub(/::$/, "", tok)
      name = tok
      sub(/^.*::/, "", name)
      cls = tok
      sub(/^arpma::/, "", cls)
      if (index(cls, "::")) sub(/::[^:]*$/, "", cls)
      else cls = ""
      decls = cxx_decls(cls, name)
      print ".PP" > file
      if (decls == "") {
        print "\\fB" tok "\\fP() is declared in the C++ headers \\fB<arpma/*.hpp>\\fP." > file
        continue
      }
      print ".RS 4" > file
      print ".nf" > file
      printf "%s", decls > file
      print ".fi" > file
      print ".RE" > file
      print ".PP" > file
      if (name ~ /^async_/)
        print "\\fB" tok "\\fP() (\\fB<" cxx_where ">\\fP) is asynchronous: it starts the operation and returns at once, and completes through any Boost.Asio completion token (a callback, \\fBasio::use_awaitable\\fP, \\fBasio::deferred\\fP, \\fBasio::use_future\\fP, ...) on the \\fBio_context\\fP that runs it" (cxx_sig != "" ? ", with the completion signature \\fB" cxx_sig "\\fP" : "") ". The header documents its errors and per-operation cancellation." > file
      else
        print "\\fB" tok "\\fP() (\\fB<" cxx_where ">\\fP) blocks like the C function and returns an \\fBarpma::result\\fP that holds the value or the \\fBstd::error_code\\fP (compare it with \\fBarpma::errc\\fP); the header documents its errors." > file
    }
  }

  # SEE ALSO: the family of the block, the functions its text names, librpma(7).
  # The object's constructor and destructor: X_new <-> X_delete, X_set_y/X_get_y -> X_new.
  s = f
  if (sub(/_new$/, "_delete", s) && s in proto) see_also_add(f, s)
  s = f
  if (sub(/_delete$/, "_new", s) && s in proto) see_also_add(f, s)
  s = f
  if (sub(/_[sg]et_[a-z0-9_]+$/, "_new", s) && s in proto) see_also_add(f, s)
  if (b > 0) {
    for (i = 1; i <= nfn; i++) if (fblk[fn[i]] == b) see_also_add(f, fn[i])
    s = blocktext[b]
    while (match(s, /rpma_[a-z0-9_]+/)) {
      g = substr(s, RSTART, RLENGTH)
      s = substr(s, RSTART + RLENGTH)
      if (g in proto) see_also_add(f, g)
    }
  }
  print ".SH SEE ALSO" > file
  for (i = 1; i <= nalso[f]; i++) print ".BR " also[f, i] " (3)," > file
  print ".BR librpma (7)" > file
  close(file)
}

function gensub_set_get(f, from, to,    i) {
  i = index(f, from)
  return substr(f, 1, i - 1) to substr(f, i + length(from))
}

# NAME lines are plain text (no font changes: whatis/apropos read them).
function roff_plain(s) {
  gsub(/\\/, "\\e", s)
  return s
}

function write_overview(    file, p, i, f, b, k, brief, text) {
  file = out "/man7/librpma.7"
  print ".\\\" Generated by scripts/gen-man.sh from include/librpma.h; do not edit." > file
  print ".TH LIBRPMA 7 \"\" \"arpma " version "\" \"arpma\"" > file
  print ".SH NAME" > file
  print "librpma \\- the librpma 1.3 C API, implemented by arpma on an asynchronous core" > file
  print ".SH SYNOPSIS" > file
  print ".nf" > file
  print ".B #include <librpma.h>" > file
  print ".PP" > file
  print "cc ... $(pkg-config --cflags --libs librpma)" > file
  print ".fi" > file
  print ".SH DESCRIPTION" > file
  if (nfb > 0) {
    parse_block(nfb)
    for (p = 1; p <= npara[nfb]; p++) {
      if (p > 1) print ".PP" > file
      print roff(with_period(para[nfb, p])) > file
    }
  }
  print ".PP" > file
  print "The functions, each with its page:" > file
  for (i = 1; i <= nfn; i++) {
    f = fn[i]
    b = fblk[f]
    k = 0
    if (b > 0) {
      parse_block(b)
      k = entry_of(b, f)
    }
    brief = k > 0 ? first_sentence(squeeze(et[b, k])) : ""
    sub(/\.$/, "", brief)
    print ".TP" > file
    print ".BR " f " (3)" > file
    print roff(capitalize(brief)) > file
  }
  print ".SH C++ AND CMAKE" > file
  print "The same library offers an asynchronous C++20 API on Boost.Asio (headers \\fB<arpma/*.hpp>\\fP; the manual blocks of the C functions name their C++ counterparts). In CMake, \\fBfind_package(arpma 0.1 CONFIG REQUIRED)\\fP gives the imported targets \\fBarpma::arpma\\fP (C++ and C API) and \\fBarpma::rpma\\fP (the C API); pkg-config has \\fBarpma\\fP and \\fBlibrpma\\fP." > file
  print ".SH SEE ALSO" > file
  print ".BR rpma_conn_req_new (3)," > file
  print ".BR pkg-config (1)" > file
  close(file)
}

# ---- reading the header ------------------------------------------------------------------

BEGIN {
  nb = 0
  nfn = 0
  nfb = 0
  inblk = 0
  inproto = 0
  inenum = 0
  instruct = 0
  intd = 0
}

# A manual block: "/*" alone on a line, " * text" lines, " */".
inblk == 0 && /^\/\*[ \t]*$/ {
  inblk = 1
  nb++
  bl[nb] = 0
  blocktext[nb] = ""
  next
}
inblk == 1 {
  if ($0 ~ /^[ \t]*\*\/[ \t]*$/) {
    inblk = 0
    # The first block, before any declaration, describes the header itself.
    if (nb == 1 && bl[nb] > 0 && bl[nb, 1] ~ /^librpma\.h -- /) {
      nfb = nb
      bl[nb, 1] = capitalize(substr(bl[nb, 1], 14))
      # All of it is description: a blank first line makes it body text.
      for (i = bl[nb]; i >= 1; i--) bl[nb, i + 1] = bl[nb, i]
      bl[nb, 1] = ""
      bl[nb]++
    }
    next
  }
  line = $0
  sub(/^[ \t]*\*/, "", line)
  sub(/^ /, "", line)
  bl[nb, ++bl[nb]] = line
  blocktext[nb] = blocktext[nb] " " line
  next
}

inenum {
  edef[ename] = edef[ename] "\n" $0
  if ($0 ~ /^\};/) inenum = 0
  next
}
/^enum [a-z_0-9]+ \{/ {
  ename = $2
  edef[ename] = $0
  inenum = 1
  next
}

instruct {
  sdef[sname] = sdef[sname] "\n" $0
  if ($0 ~ /^\};/) instruct = 0
  next
}
/^struct [a-z_0-9]+ \{/ {
  sname = $2
  sdef[sname] = $0
  instruct = 1
  next
}

/^#define [A-Z_0-9]+/ {
  ddef[$2] = $0
  if ($2 ~ /^RPMA_E_/ && index($0, "/*")) {
    s = substr($0, index($0, "/*") + 2)
    sub(/\*\/.*$/, "", s)
    errdesc[$2] = trim(s)
    # The synopsis shows the macro without its comment.
    sub(/[ \t]*\/\*.*$/, "", ddef[$2])
  }
  next
}

intd {
  tdtext = tdtext " " trim($0)
  if ($0 ~ /;/) {
    intd = 0
    finish_typedef()
  }
  next
}
/^typedef / {
  tdtext = $0
  if ($0 ~ /;/) finish_typedef()
  else intd = 1
  next
}

inproto {
  ptext = ptext " " trim($0)
  if ($0 ~ /;/) {
    inproto = 0
    finish_proto()
  }
  next
}
/^[A-Za-z]/ && /\(/ && !/^(typedef|enum|struct [a-z_0-9]+ *[;{]|extern|#)/ {
  ptext = $0
  if ($0 ~ /;/) finish_proto()
  else inproto = 1
  next
}

function finish_typedef(    s, name) {
  s = squeeze(tdtext)
  name = s
  if (index(name, "(")) name = substr(name, 1, index(name, "(") - 1)
  else sub(/;$/, "", name)
  sub(/^.*[ *]/, "", name)
  tdef[name] = layout(s, 72)
}

function finish_proto(    s, name, ret) {
  s = squeeze(ptext)
  name = substr(s, 1, index(s, "(") - 1)
  ret = name
  sub(/^.*[ *]/, "", name)
  ret = trim(substr(ret, 1, length(ret) - length(name)))
  if (name in proto) return
  proto[name] = 1
  fn[++nfn] = name
  fproto[name] = s
  fproto_ret[name] = ret
  # The block right above documents it; the header's own block documents nothing.
  fblk[name] = (nb > 0 && nb != nfb) ? nb : 0
}

END {
  if (nfn == 0) {
    print "gen-man: no function declarations found" > "/dev/stderr"
    exit 1
  }
  for (i = 1; i <= nfn; i++) write_page(fn[i])
  write_overview()
  print "gen-man: " nfn " pages in " out "/man3, librpma(7) in " out "/man7"
}
