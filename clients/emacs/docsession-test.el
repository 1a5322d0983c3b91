;;; docsession-test.el --- ERT tests of docsession.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; Run with clients/emacs/run-tests.sh, or:
;;
;;   emacs --batch -Q -L clients/emacs -l clients/emacs/docsession-test.el \
;;         -f ert-run-tests-batch-and-exit
;;
;; The server is $DOCSESSION_BIN, else <repo>/.build/debug/docsession.
;; Each test starts its own server with --state-dir in a temp directory.

;;; Code:

(require 'ert)
(require 'docsession)

(defconst docsession-test--binary
  (or (getenv "DOCSESSION_BIN")
      (expand-file-name "../../.build/debug/docsession"
                        (file-name-directory
                         (or load-file-name buffer-file-name))))
  "The server executable the tests run.")

(defconst docsession-test--text "Héllo wörld 😀 café\n日本語のテキスト\nthird line\n"
  "A text with non-ASCII characters: é, an emoji, CJK.")

(defvar docsession-test--dir nil
  "The temp directory of the running test.")

(defun docsession-test--write-file (file text)
  "Write TEXT to FILE in UTF-8 as another program: with printf in sh.
Every byte is written as an octal escape, so the argument is ASCII."
  (let ((format (mapconcat (lambda (byte) (format "\\%03o" byte))
                           (encode-coding-string text 'utf-8 t) "")))
    (should (zerop (call-process "sh" nil nil nil "-c" "printf \"$1\" > \"$2\""
                                 "sh" format file)))))

(defun docsession-test--file-text (file)
  "Return the content of FILE decoded from UTF-8, line breaks as they are."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (decode-coding-string (buffer-string) 'utf-8-unix)))

(defun docsession-test--server-text ()
  "Return the document's text as the server has it, checking the version."
  (let ((result (docsession--request :document/read
                                     (list :document docsession--document))))
    (should (equal (plist-get result :version) docsession--version))
    (plist-get result :text)))

(defun docsession-test--check ()
  "Check that the server's text is the buffer's."
  (should (equal (docsession-test--server-text) (buffer-string))))

(defun docsession-test--wait-for (predicate &optional seconds)
  "Pump process output until PREDICATE returns non-nil, for up to SECONDS."
  (let ((deadline (+ (float-time) (or seconds 5))))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (should (funcall predicate))))

(defmacro docsession-test--with-file (spec &rest body)
  "Run BODY in a buffer visiting a new file, with `docsession-mode' on.
SPEC is (NAME CONTENT &optional NO-MODE): the file NAME in a temp
directory, written with CONTENT (a unibyte string is written as is);
with NO-MODE non-nil the mode is not enabled.  The variable `file'
is bound to the file's name."
  (declare (indent 1) (debug ((symbolp form &optional form) body)))
  (let ((name (nth 0 spec)) (content (nth 1 spec)) (no-mode (nth 2 spec)))
    `(let* ((docsession-test--dir (make-temp-file "docsession-el-" t))
            (docsession-program docsession-test--binary)
            (docsession-program-args
             (list "--stdio" "--state-dir"
                   (expand-file-name "state" docsession-test--dir)))
            (file (expand-file-name ,name docsession-test--dir))
            (buffer nil))
       (unwind-protect
           (progn
             (let ((coding-system-for-write 'no-conversion))
               (write-region (let ((c ,content))
                               (if (multibyte-string-p c)
                                   (encode-coding-string c 'utf-8 t)
                                 c))
                             nil file nil 'silent))
             (setq buffer (find-file-noselect file))
             (with-current-buffer buffer
               (unless ,no-mode (docsession-mode 1))
               ,@body))
         (when (buffer-live-p buffer)
           (with-current-buffer buffer (set-buffer-modified-p nil))
           (kill-buffer buffer))
         (docsession-shutdown)
         (delete-directory docsession-test--dir t)))))

(ert-deftest docsession-test-open ()
  "Enabling the mode opens the file; the server's text is the buffer's."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (should docsession-mode)
    (should (stringp docsession--document))
    (should (equal docsession--version 1))
    (should (equal (buffer-string) docsession-test--text))
    (docsession-test--check)
    (should (equal (docsession--lighter) " DS"))))

(ert-deftest docsession-test-edits ()
  "Insertions, deletions and replacements reach the server as made."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    ;; Insert after the é (a character past a non-ASCII one).
    (goto-char (point-min))
    (search-forward "é")
    (insert "X")
    (docsession-test--check)
    (should (equal (docsession--lighter) " DS*"))
    ;; Insert right after the emoji, then before it.
    (search-forward "😀")
    (insert "🎉")
    (docsession-test--check)
    (backward-char 2)
    (insert "<")
    (docsession-test--check)
    ;; Delete the emoji.
    (search-forward "😀")
    (delete-char -1)
    (docsession-test--check)
    ;; Replace inside the CJK line.
    (goto-char (point-min))
    (search-forward "テキスト")
    (replace-match "TEXT 😀")
    (docsession-test--check)
    ;; A multi-line deletion, from line 0 into line 1.
    (goto-char (point-min))
    (search-forward "wörld")
    (let ((start (point)))
      (search-forward "本")
      (delete-region start (point)))
    (docsession-test--check)
    ;; A multi-line insertion in the middle of a line.
    (goto-char (point-min))
    (search-forward "third")
    (insert "\nnew 😀 line\n\nanother ")
    (docsession-test--check)
    ;; A multi-line replacement.
    (goto-char (point-min))
    (forward-line 1)
    (let ((start (point)))
      (forward-line 2)
      (delete-region start (point))
      (goto-char start)
      (insert "replaced\nby 日本\n"))
    (docsession-test--check)
    ;; Changes whose announced region is larger than the change.
    (upcase-region (point-min) (point-max))
    (docsession-test--check)
    (subst-char-in-region (point-min) (point-max) ?E ?e)
    (docsession-test--check)
    ;; At the very end and the very beginning, then everything.
    (goto-char (point-max))
    (insert "end 😀")
    (docsession-test--check)
    (goto-char (point-min))
    (insert "😀")
    (docsession-test--check)
    (erase-buffer)
    (docsession-test--check)
    (insert docsession-test--text)
    (docsession-test--check)))

(ert-deftest docsession-test-save ()
  "`save-buffer' writes the file through the server."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (goto-char (point-max))
    (insert "saved 😀 line\n")
    (should (buffer-modified-p))
    (should (equal (docsession--lighter) " DS*"))
    (save-buffer)
    (should-not (buffer-modified-p))
    (should (equal (docsession--lighter) " DS"))
    (should (equal (docsession-test--file-text file) (buffer-string)))
    (should (equal (docsession-test--file-text file)
                   (concat docsession-test--text "saved 😀 line\n")))
    ;; No backup or other file was written by Emacs.
    (should-not (file-exists-p (concat file "~")))
    ;; And a second round.
    (goto-char (point-min))
    (delete-char 1)
    (save-buffer)
    (should (equal (docsession-test--file-text file) (buffer-string)))
    (should-not (buffer-modified-p))))

(ert-deftest docsession-test-external-change ()
  "Another program's write reaches a clean buffer, keeping point."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (goto-char (point-min))
    (search-forward "third ")
    (let ((new "Héllo wörld 😀 café, changed\ninserted 日本\n日本語のテキスト\nthird line\nlast\n"))
      (docsession-test--write-file file new)
      (docsession-test--wait-for (lambda () (equal (buffer-string) new)))
      (should (looking-at "line\nlast"))
      (should-not (buffer-modified-p))
      (should (equal (docsession--lighter) " DS"))
      (docsession-test--check)
      ;; Editing after the reload works, and Emacs does not think the
      ;; file changed behind its back.
      (should (verify-visited-file-modtime))
      (insert "x")
      (docsession-test--check)
      (save-buffer)
      (should (equal (docsession-test--file-text file) (buffer-string))))))

(ert-deftest docsession-test-move ()
  "Another program's move renames the visited file."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (let ((new (expand-file-name "moved.md" docsession-test--dir)))
      (should (zerop (call-process "mv" nil nil nil file new)))
      (docsession-test--wait-for (lambda () (equal buffer-file-name new)))
      (should docsession-mode)
      (should-not (buffer-modified-p))
      (goto-char (point-max))
      (insert "after the move\n")
      (docsession-test--check)
      (save-buffer)
      (should (equal (docsession-test--file-text new) (buffer-string)))
      (should-not (file-exists-p file)))))

(ert-deftest docsession-test-conflict ()
  "An external write over unsaved changes shows the conflict."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (goto-char (point-min))
    (insert "mine ")
    (should (equal (docsession--lighter) " DS*"))
    (docsession-test--write-file file "theirs 😀\n")
    (docsession-test--wait-for
     (lambda () (equal (docsession--lighter) " DS!conflict")))
    ;; The buffer kept its text.
    (should (equal (buffer-string) (concat "mine " docsession-test--text)))
    (docsession-test--check)
    ;; Taking the file's text ends the conflict.
    (docsession-resolve-conflict "theirs")
    (should (equal (buffer-string) "theirs 😀\n"))
    (should (equal (docsession--lighter) " DS"))
    (should-not (buffer-modified-p))
    (docsession-test--check)))

(ert-deftest docsession-test-deleted ()
  "A deletion shows in the mode line; saving writes the file again."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (delete-file file)
    (docsession-test--wait-for
     (lambda () (equal (docsession--lighter) " DS!deleted")))
    (save-buffer)
    (should (equal (docsession--lighter) " DS"))
    (should (equal (docsession-test--file-text file) docsession-test--text))))

(ert-deftest docsession-test-modified-before-enabling ()
  "A buffer modified before the mode is enabled sends its text."
  (docsession-test--with-file ("notes.txt" docsession-test--text t)
    (goto-char (point-min))
    (insert "early 😀 ")
    (docsession-mode 1)
    (docsession-test--check)
    (should (equal (docsession--lighter) " DS*"))
    (should (equal (docsession-test--file-text file) docsession-test--text))))

(ert-deftest docsession-test-crlf ()
  "A CRLF file: the buffer has no \\r, the file keeps its CRLFs."
  (docsession-test--with-file ("crlf.txt" "one\r\ntwo 😀\r\n")
    (should (eq (coding-system-eol-type buffer-file-coding-system) 1))
    (should (equal (buffer-string) "one\ntwo 😀\n"))
    (goto-char (point-max))
    (insert "three\nfour\n")
    (should (equal (docsession-test--server-text)
                   "one\r\ntwo 😀\r\nthree\r\nfour\r\n"))
    (goto-char (point-min))
    (end-of-line)
    (delete-char 1)                     ; Join the first two lines.
    (should (equal (docsession-test--server-text)
                   "onetwo 😀\r\nthree\r\nfour\r\n"))
    (save-buffer)
    (should (equal (docsession-test--file-text file)
                   "onetwo 😀\r\nthree\r\nfour\r\n"))))

(ert-deftest docsession-test-mixed-line-breaks-refused ()
  "A buffer holding a carriage return is refused."
  (docsession-test--with-file ("mixed.txt" "one\r\ntwo\nthree\r" t)
    (should-error (docsession-mode 1) :type 'user-error)
    (should-not docsession-mode)
    (should-not docsession--document)))

(ert-deftest docsession-test-disable-closes ()
  "Disabling the mode closes the document without saving."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (let ((handle docsession--document))
      (insert "unsaved ")
      (docsession-mode -1)
      (should-not docsession--document)
      (should (buffer-modified-p))
      (should (equal (docsession-test--file-text file) docsession-test--text))
      (should-error (docsession--request :document/state
                                         (list :document handle)))
      ;; Emacs saves the buffer itself now.
      (save-buffer)
      (should (equal (docsession-test--file-text file) (buffer-string))))))

(ert-deftest docsession-test-rebase ()
  "An edit made against a version the server has left is rebased."
  (docsession-test--with-file ("notes.txt" "alpha\nbeta\ngamma\n")
    ;; Simulate the race: the server reloaded the file (version 2) and its
    ;; didChange is still in flight when the user types.
    (let ((new "alpha\nBETA 😀\ngamma\n"))
      (docsession-test--write-file file new)
      ;; Give the server time to reload, without reading its notification
      ;; (`sleep-for' would run the process filter; `call-process' does not).
      (call-process "sleep" nil nil nil "0.5")
      (let ((docsession--request-depth 1))
        ;; Notifications read now are queued, as during a request.
        (accept-process-output nil 0.3))
      (should docsession--queue)
      (goto-char (point-max))
      (insert "delta\n")
      (should (equal (buffer-string) (concat new "delta\n")))
      (should (looking-at-p "\\'"))
      ;; Version 2 is the reload, 3 the edit sent again.
      (should (equal docsession--version 3))
      (docsession-test--check))))

(ert-deftest docsession-test-kill-buffer-closes ()
  "Killing the buffer closes the document."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (let ((handle docsession--document))
      (kill-buffer)
      (should-error (docsession--request :document/state
                                         (list :document handle)))
      (should (zerop (hash-table-count docsession--buffers))))))

;;; Recovery of a dead server's unsaved changes

(defun docsession-test--journal-size ()
  "Return the total size of the journals in the test's state directory."
  (let ((dir (expand-file-name "state/journal" docsession-test--dir)))
    (if (file-directory-p dir)
        ;; A journal deleted between the listing and its attributes counts as empty.
        (apply #'+ (mapcar (lambda (f) (or (file-attribute-size (file-attributes f)) 0))
                           (directory-files dir t "\\.journal\\'")))
      0)))

(defun docsession-test--journal-holds-p (text)
  "Return non-nil if a journal in the test's state directory holds TEXT."
  (let ((dir (expand-file-name "state/journal" docsession-test--dir))
        (bytes (encode-coding-string text 'utf-8 t)))
    (and (file-directory-p dir)
         (seq-some (lambda (f)
                     (with-temp-buffer
                       (set-buffer-multibyte nil)
                       (insert-file-contents-literally f)
                       (search-forward bytes nil t)))
                   (directory-files dir t "\\.journal\\'")))))

(defun docsession-test--edit-and-journal (edit text)
  "Call EDIT, which inserts TEXT, and wait until the journal holds it.
The journals grow when the server's writer has written the change (at
most `flushDelay' after it): poll their size, then their content."
  (let ((before (docsession-test--journal-size)))
    (funcall edit)
    (docsession-test--wait-for
     (lambda () (and (> (docsession-test--journal-size) before)
                     (docsession-test--journal-holds-p text))))))

(defun docsession-test--crash ()
  "Make two unsaved edits, wait for the journal, SIGKILL the server.
Return the buffer's text, then kill the buffer."
  (docsession-test--edit-and-journal
   (lambda () (goto-char (point-min)) (insert "Recovered 😀 "))
   "Recovered 😀 ")
  (docsession-test--edit-and-journal
   (lambda () (goto-char (point-max)) (insert "last line ✓\n"))
   "last line ✓\n")
  (should (equal docsession--version 3))
  (let ((process (jsonrpc--process docsession--connection))
        (text (buffer-string)))
    (signal-process process 'SIGKILL)
    (docsession-test--wait-for (lambda () (null docsession--connection)))
    (should-not docsession-mode)
    (set-buffer-modified-p nil)
    (kill-buffer)
    text))

(defun docsession-test--revisit (file action)
  "Visit FILE again and enable the mode with `docsession-recovery-action' ACTION."
  (let ((docsession-recovery-action action))
    (with-current-buffer (find-file-noselect file)
      (docsession-mode 1)
      (current-buffer))))

(defun docsession-test--server-undo ()
  "Undo one step through the server and apply its edits to the buffer."
  (pcase-let ((`(ok ,result) (docsession--call :document/undo
                                               (list :document docsession--document))))
    (docsession--apply-edits (plist-get result :edits))
    (setq docsession--version (plist-get result :version))
    (docsession--drain)))

(ert-deftest docsession-test-recover ()
  "A dead server's unsaved changes are offered, listed and recovered."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (let ((edited (docsession-test--crash)))
      (should (equal edited (concat "Recovered 😀 " docsession-test--text
                                    "last line ✓\n")))
      (should (equal (docsession-test--file-text file) docsession-test--text))
      ;; A new server on the same state directory lists the journal.
      (let ((journals (docsession-recoverable)))
        (should (= (length journals) 1))
        (should (equal (plist-get (car journals) :uri)
                       (docsession--file-to-uri file)))
        (should (equal (plist-get (car journals) :edits) 2))
        (should (eq (plist-get (car journals) :open) :json-false)))
      (docsession-recoverable t)
      (with-current-buffer "*docsession recoverable*"
        (goto-char (point-min))
        (should (search-forward (concat "2 edits  " file "\n") nil t)))
      (setq buffer (docsession-test--revisit file 'recover))
      (with-current-buffer buffer
        (should docsession-mode)
        (should (equal (buffer-string) edited))
        (should (buffer-modified-p))
        (should-not docsession--recovery)
        (should (equal docsession--version 3))
        (should (equal (docsession--lighter) " DS*"))
        (docsession-test--check)
        (should (null (docsession-recoverable)))
        ;; Editing goes on from the recovered version.
        (goto-char (point-max))
        (insert "more")
        (docsession-test--check)
        (delete-char -4)
        (docsession-test--check)
        ;; Undo through the server: back, step by step, to the file's text.
        (let ((steps 0))
          (while (and (< steps 10)
                      (eq (plist-get (docsession--request
                                      :document/state
                                      (list :document docsession--document))
                                     :canUndo)
                          t))
            (docsession-test--server-undo)
            (cl-incf steps)
            (docsession-test--check)))
        (should (equal (buffer-string) docsession-test--text))
        (should-not (buffer-modified-p))
        (should (equal (docsession--lighter) " DS"))
        (docsession-test--check)
        ;; Clean again: the journal goes (written by the server's writer).
        (docsession-test--wait-for
         (lambda () (zerop (docsession-test--journal-size))))))))

(ert-deftest docsession-test-discard-recovery ()
  "Discarding the offer keeps the file's text; nothing is offered again."
  (docsession-test--with-file ("notes.txt" docsession-test--text)
    (docsession-test--crash)
    (setq buffer (docsession-test--revisit file 'discard))
    (with-current-buffer buffer
      (should docsession-mode)
      (should (equal (buffer-string) docsession-test--text))
      (should-not (buffer-modified-p))
      (should-not docsession--recovery)
      (should (equal (docsession--lighter) " DS"))
      (docsession-test--check)
      (should (zerop (docsession-test--journal-size)))
      ;; Opened again (by this server, then by a new one): no offer.
      (docsession-mode -1)
      (let ((docsession-recovery-action 'recover))
        (docsession-mode 1)
        (should-not docsession--recovery)
        (should (equal (buffer-string) docsession-test--text))
        (docsession-shutdown)
        (docsession-mode 1)
        (should-not docsession--recovery)
        (should (equal (buffer-string) docsession-test--text))
        (should (null (docsession-recoverable)))))))

(ert-deftest docsession-test-recover-in-conflict ()
  "A file changed after the crash: the offer waits, recovering gives a conflict."
  (docsession-test--with-file ("notes.txt" "alpha\nbeta\ngamma\n")
    (docsession-test--edit-and-journal
     (lambda () (goto-char (point-min)) (insert "mine "))
     "mine ")
    (signal-process (jsonrpc--process docsession--connection) 'SIGKILL)
    (docsession-test--wait-for (lambda () (null docsession--connection)))
    (set-buffer-modified-p nil)
    (kill-buffer)
    (docsession-test--write-file file "alpha\nbeta\ngamma, theirs\n")
    ;; Asked, the user decides later.
    (let* ((prompt nil)
           (completing-read-function
            (lambda (p &rest _) (setq prompt p) "later")))
      (setq buffer (docsession-test--revisit file 'ask))
      (should (string-match-p "1 edit).*the file changed since.*Recover, discard"
                              prompt)))
    (with-current-buffer buffer
      ;; The offer waits; the buffer holds the file's text.
      (should (equal (buffer-string) "alpha\nbeta\ngamma, theirs\n"))
      (should docsession--recovery)
      (should (equal (plist-get docsession--recovery :edits) 1))
      (should (eq (plist-get docsession--recovery :fileMatchesBase) :json-false))
      (should (string-match-p "the file changed since"
                              (docsession--describe-recovery docsession--recovery)))
      (should (equal (docsession--lighter) " DS!recover"))
      (let ((journals (docsession-recoverable)))
        (should (= (length journals) 1))
        (should (eq (plist-get (car journals) :open) t)))
      ;; Recovering brings the conflict.
      (docsession-recover)
      (should (equal (buffer-string) "mine alpha\nbeta\ngamma\n"))
      (should (equal (docsession--lighter) " DS!conflict"))
      (docsession-test--check)
      (docsession-resolve-conflict "merge")
      (should (equal (buffer-string) "mine alpha\nbeta\ngamma, theirs\n"))
      (should (equal (docsession--lighter) " DS*"))
      (docsession-test--check)
      (save-buffer)
      (should (equal (docsession-test--file-text file) (buffer-string))))))

(ert-deftest docsession-test-edited-elsewhere ()
  "A file with unsaved changes in another running server: a warning, no offer."
  (docsession-test--with-file ("notes.txt" docsession-test--text t)
    (let ((other (make-instance
                  'jsonrpc-process-connection
                  :name "docsession-other"
                  :events-buffer-scrollback-size 0
                  :process
                  (lambda ()
                    (make-process
                     :name "docsession-other"
                     :command (cons docsession-program docsession-program-args)
                     :connection-type 'pipe :coding 'utf-8-emacs-unix :noquery t
                     :stderr (get-buffer-create "*docsession-other stderr*"))))))
      (unwind-protect
          (progn
            (jsonrpc-request other :initialize (list :capabilities nil))
            (jsonrpc-notify other :initialized nil)
            (let ((handle (plist-get (jsonrpc-request
                                      other :document/open
                                      (list :uri (docsession--file-to-uri file)))
                                     :document)))
              (docsession-test--edit-and-journal
               (lambda ()
                 (jsonrpc-request other :document/edit
                                  (list :document handle :version 1
                                        :edits (vector (list :text "theirs\n")))))
               "theirs\n"))
            (let ((docsession-recovery-action 'recover))
              (docsession-mode 1))
            (should docsession--edited-elsewhere)
            (should-not docsession--recovery)
            (should (equal (buffer-string) docsession-test--text))
            (docsession-test--check))
        (jsonrpc-shutdown other t)))))

;;; Sync tools' conflict copies

(defconst docsession-test--syncthing-copy
  "notes.sync-conflict-20261128-101502-ABCDEFG.txt"
  "A Syncthing conflict copy of notes.txt: device ABCDEFG, 2026-11-28 10:15:02.")

(defconst docsession-test--nextcloud-copy
  "notes (conflicted copy 2026-11-28 093000).txt"
  "A Nextcloud conflict copy of notes.txt, without a user: 2026-11-28 09:30:00.")

(defvar docsession-test--messages nil
  "The messages shown while `docsession-test--with-messages' runs, newest first.")

(defun docsession-test--record-message (format &rest args)
  "Record the message FORMAT with ARGS in `docsession-test--messages'."
  (when format
    (push (apply #'format-message format args) docsession-test--messages)))

(defmacro docsession-test--with-messages (&rest body)
  "Run BODY recording the messages shown in `docsession-test--messages'."
  (declare (indent 0) (debug t))
  `(let ((docsession-test--messages nil))
     (advice-add 'message :before #'docsession-test--record-message)
     (unwind-protect (progn ,@body)
       (advice-remove 'message #'docsession-test--record-message))))

(defun docsession-test--message-matching (regexp)
  "Return the newest recorded message matching REGEXP, or nil."
  (seq-find (lambda (m) (string-match-p regexp m)) docsession-test--messages))

(defun docsession-test--no-prompt (&rest _)
  "Fail: a prompt was shown."
  (error "A prompt was shown"))

(ert-deftest docsession-test-sync-copy-theirs ()
  "A copy beside a buffer with unsaved edits shows, is named, and is taken."
  (docsession-test--with-file ("notes.txt" "Hello, world!\nSecond line\n")
    (docsession-test--with-messages
      (goto-char (point-min))
      (insert "Howdy ")
      (should (equal (docsession--lighter) " DS*"))
      (let ((copy (expand-file-name docsession-test--syncthing-copy
                                    docsession-test--dir)))
        (docsession-test--write-file copy "Hello from the laptop 😀\n")
        (docsession-test--wait-for
         (lambda () (and (equal (docsession--lighter) " DS!copies")
                         docsession--sync-copies)))
        (should (= (length docsession--sync-copies) 1))
        (let ((entry (car docsession--sync-copies)))
          (should (equal (plist-get entry :id)
                         (concat "sync:" docsession-test--syncthing-copy)))
          (should (equal (plist-get entry :tool) "syncthing"))
          (should (equal (plist-get entry :device) "ABCDEFG")))
        ;; The message names the file, the tool, the device and the date
        ;; (local time, as the name has it), and the command.
        (should (docsession-test--message-matching
                 (regexp-quote "docsession: notes.txt has a conflict copy from \
syncthing (device ABCDEFG, 2026-11-28 10:15): M-x docsession-resolve-sync-conflict")))
        ;; The buffer kept its text; the server has it.
        (should (equal (buffer-string) "Howdy Hello, world!\nSecond line\n"))
        (docsession-test--check)
        ;; Theirs: the buffer holds the copy's text, the copy is gone.
        (docsession-resolve-sync-conflict
         (concat "sync:" docsession-test--syncthing-copy) "theirs")
        (should (equal (buffer-string) "Hello from the laptop 😀\n"))
        (docsession-test--check)
        (should-not (file-exists-p copy))
        (should-not docsession--sync-copies)
        (should (equal (docsession--lighter) " DS*"))
        ;; The scheduled refresh after conflictResolved finds none left.
        (docsession-test--wait-for
         (lambda () (not docsession--sync-refresh-pending)))
        (should-not docsession--sync-copies)
        (should (equal (docsession--lighter) " DS*"))
        ;; The copy's text is an unsaved change: saving writes it.
        (cl-letf (((symbol-function 'yes-or-no-p) #'docsession-test--no-prompt))
          (save-buffer))
        (should (equal (docsession-test--file-text file)
                       "Hello from the laptop 😀\n"))
        (should (equal (docsession--lighter) " DS"))))))

(ert-deftest docsession-test-sync-copy-before-open ()
  "A copy there before the open shows at once; a save goes through unasked."
  (docsession-test--with-file ("notes.txt" "alpha\nbeta\n" t)
    (docsession-test--with-messages
      (let ((copy (expand-file-name docsession-test--syncthing-copy
                                    docsession-test--dir)))
        (docsession-test--write-file copy "alpha\nbeta, laptop\n")
        (docsession-mode 1)
        ;; At once: no waiting.
        (should (equal (docsession--lighter) " DS!copies"))
        (should (= (length docsession--sync-copies) 1))
        (should (docsession-test--message-matching
                 "notes.txt has a conflict copy from syncthing (device ABCDEFG, 2026-11-28 10:15)"))
        ;; The copy's text, in a read-only buffer.
        (let ((shown (docsession-show-conflict-copy
                      (concat "sync:" docsession-test--syncthing-copy))))
          (unwind-protect
              (with-current-buffer shown
                (should (equal (buffer-string) "alpha\nbeta, laptop\n"))
                (should buffer-read-only))
            (kill-buffer shown)))
        ;; A save while the copy waits: written, nothing asked.
        (goto-char (point-max))
        (insert "gamma\n")
        (cl-letf (((symbol-function 'yes-or-no-p) #'docsession-test--no-prompt)
                  ((symbol-function 'y-or-n-p) #'docsession-test--no-prompt))
          (save-buffer))
        (should (equal (docsession-test--file-text file) "alpha\nbeta\ngamma\n"))
        (should-not (buffer-modified-p))
        (should (file-exists-p copy))
        ;; The copy still waits.
        (should (member "inConflict" docsession--state))
        (should (equal (docsession--lighter) " DS!copies"))
        ;; The tool removes it (no resolution): the lighter is back.
        (delete-file copy)
        (docsession-test--wait-for
         (lambda () (and (equal (docsession--lighter) " DS")
                         (not docsession--sync-refresh-pending))))
        (should-not docsession--sync-copies)))))

(ert-deftest docsession-test-sync-two-copies ()
  "Two copies: a merge answering regions changes nothing; one resolved, the other stays."
  (docsession-test--with-file ("notes.txt" "alpha\nbeta\ngamma\n")
    (docsession-test--with-messages
      (let ((first (expand-file-name docsession-test--syncthing-copy
                                     docsession-test--dir))
            (second (expand-file-name docsession-test--nextcloud-copy
                                      docsession-test--dir)))
        (goto-char (point-min))
        (delete-char 5)
        (insert "ALPHA")
        (docsession-test--write-file first "alpha, laptop\nbeta\ngamma\n")
        (docsession-test--wait-for
         (lambda () (= (length docsession--sync-copies) 1)))
        (docsession-test--write-file second "alpha\nbeta\ngamma, phone\n")
        (docsession-test--wait-for
         (lambda () (= (length docsession--sync-copies) 2)))
        (should (equal (docsession--lighter) " DS!copies"))
        ;; The second copy's message: no device in a Nextcloud name.
        (should (docsession-test--message-matching
                 (regexp-quote "has a conflict copy from nextcloud (2026-11-28 09:30)")))
        ;; Interactively: the copy is picked among the two, shown with its
        ;; tool, device and date; the Syncthing copy, merged, overlaps.
        (let* ((prompts nil)
               (completing-read-function
                (lambda (prompt collection &rest _)
                  (push (cons prompt (all-completions "" collection)) prompts)
                  (if (string-match-p "with" prompt)
                      "merge"
                    (seq-find (lambda (c) (string-match-p "syncthing" c))
                              (all-completions "" collection))))))
          (call-interactively #'docsession-resolve-sync-conflict)
          (let ((copies (cdr (car (last prompts)))))
            (should (= (length copies) 2))
            (should (member (concat docsession-test--syncthing-copy
                                    ": syncthing (device ABCDEFG, 2026-11-28 10:15)")
                            copies))
            (should (member (concat docsession-test--nextcloud-copy
                                    ": nextcloud (2026-11-28 09:30)")
                            copies))))
        ;; Nothing changed; the regions are shown.
        (should (equal (buffer-string) "ALPHA\nbeta\ngamma\n"))
        (docsession-test--check)
        (should (file-exists-p first))
        (with-current-buffer "*docsession merge*"
          (should (string-match-p "<<<<<<< mine (the buffer)\nALPHA\n" (buffer-string)))
          (should (string-match-p "======= theirs (the copy)\nalpha, laptop\n"
                                  (buffer-string))))
        ;; Mine settles the first copy: removed; the other is still shown.
        (docsession-resolve-sync-conflict
         (concat "sync:" docsession-test--syncthing-copy) "mine")
        (should-not (file-exists-p first))
        (should (file-exists-p second))
        (should (equal (buffer-string) "ALPHA\nbeta\ngamma\n"))
        (docsession-test--wait-for (lambda () (not docsession--sync-refresh-pending)))
        (should (= (length docsession--sync-copies) 1))
        (should (equal (plist-get (car docsession--sync-copies) :tool) "nextcloud"))
        (should (equal (docsession--lighter) " DS!copies"))
        ;; The second, merged: both changes.
        (docsession-resolve-sync-conflict
         (concat "sync:" docsession-test--nextcloud-copy) "merge")
        (should (equal (buffer-string) "ALPHA\nbeta\ngamma, phone\n"))
        (docsession-test--check)
        (should-not (file-exists-p second))
        (should (equal (docsession--lighter) " DS*"))))))

(ert-deftest docsession-test-sync-copy-and-file-conflict ()
  "A conflict with the file is DS!conflict, and a save of it still asks."
  (docsession-test--with-file ("notes.txt" "one\n")
    (insert "mine ")
    (docsession-test--write-file file "theirs\n")
    (docsession-test--wait-for
     (lambda () (equal (docsession--lighter) " DS!conflict")))
    (let ((asked nil))
      (cl-letf (((symbol-function 'yes-or-no-p)
                 (lambda (prompt) (setq asked prompt) nil)))
        (should-error (save-buffer) :type 'user-error))
      (should (string-match-p "changed on disk" asked)))
    (should (equal (docsession-test--file-text file) "theirs\n"))
    (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_) t)))
      (save-buffer))
    (should (equal (docsession-test--file-text file) "mine one\n"))
    (should (equal (docsession--lighter) " DS"))))

(provide 'docsession-test)
;;; docsession-test.el ends here
