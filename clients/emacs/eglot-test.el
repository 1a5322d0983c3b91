;;; eglot-test.el --- The LSP mode with Emacs's own eglot, nothing of ours loaded  -*- lexical-binding: t; -*-

;; Headless tests of the server's LSP mode (protocol/README.md §12) driven through eglot 1.9
;; (Debian's elpa-eglot) with configuration only: `eglot-server-programs' names the server for
;; text-mode, and `eglot-confirm-server-initiated-edits' is nil so that the server's
;; `workspace/applyEdit' is applied without a y-or-n prompt.  The answer a `window/showMessageRequest'
;; gets is what a user would pick in eglot's `completing-read' prompt: batch Emacs has nobody to
;; ask, so the tests answer it (`docsession-eglot-test--answering').  docsession.el is not loaded.
;;
;; Run by clients/emacs/run-tests.sh: emacs --batch -Q, with Debian's elpa packages activated.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'eglot)

(defvar docsession-eglot-test--bin
  (or (getenv "DOCSESSION_BIN")
      (expand-file-name "../../.build/debug/docsession"
                        (file-name-directory (or load-file-name buffer-file-name))))
  "The server binary.")

(defun docsession-eglot-test--wait (predicate &optional seconds)
  "Wait until PREDICATE answers non-nil, for at most SECONDS (default 20); its value."
  (let ((deadline (+ (float-time) (or seconds 20)))
        value)
    (while (and (not (setq value (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.02))
    value))

(defun docsession-eglot-test--write (path text)
  "Write TEXT to PATH as another program would."
  (let ((coding-system-for-write 'utf-8-unix))
    (write-region text nil path nil 'silent)))

(defun docsession-eglot-test--rewrite (path text)
  "Rewrite PATH in place in one write (never empty in between), as another program would."
  (let ((old (file-attribute-size (file-attributes path)))
        (bytes (encode-coding-string text 'utf-8-unix)))
    ;; A number as APPEND: written at that offset, the file not truncated (the same inode).
    (let ((coding-system-for-write 'no-conversion))
      (write-region bytes nil path 0 'silent))
    (when (< (length bytes) old)
      (call-process "truncate" nil nil nil "-s" (number-to-string (length bytes)) path))))

(defun docsession-eglot-test--file (path)
  "PATH's text."
  (with-temp-buffer
    (let ((coding-system-for-read 'utf-8-unix))
      (insert-file-contents path))
    (buffer-string)))

(defun docsession-eglot-test--fresh (text)
  "A new directory with a state directory and notes.txt holding TEXT: (DIR . PATH)."
  (let* ((dir (make-temp-file "docsession-eglot-" t))
         (path (expand-file-name "notes.txt" dir)))
    (make-directory (expand-file-name "state" dir))
    (docsession-eglot-test--write path text)
    (cons dir path)))

(defvar docsession-eglot-test--answers nil
  "The titles the user picks at the next `window/showMessageRequest's, in order.")
(defvar docsession-eglot-test--asked nil
  "The prompts of the `window/showMessageRequest's seen, newest first.")

(defvar docsession-eglot-test--yes-no nil
  "The yes-or-no questions Emacs asked, newest first (all answered no).")

(defmacro docsession-eglot-test--answering (&rest body)
  "Run BODY with the user's answers: eglot's prompt for a message request answered from
`docsession-eglot-test--answers'; Emacs's own \"File changed on disk.  Discard your edits?\",
which `find-file-noselect' asks when the server's edit reaches a modified buffer whose file
changed (a conflict being merged), answered no: the edits stay, and the server's edit applies."
  `(cl-letf (((symbol-function 'completing-read)
              (lambda (prompt collection &rest _)
                (push (cons prompt (all-completions "" collection)) docsession-eglot-test--asked)
                (or (pop docsession-eglot-test--answers) "")))
             ((symbol-function 'yes-or-no-p)
              (lambda (prompt) (push prompt docsession-eglot-test--yes-no) nil)))
     ,@body))

(defun docsession-eglot-test--open (dir path)
  "Visit PATH in text-mode and connect eglot to a server with DIR's state directory; the buffer."
  (let ((eglot-server-programs
         `((text-mode . (,docsession-eglot-test--bin "serve" "--state-dir" ,(expand-file-name "state" dir)))))
        (buffer (find-file-noselect path)))
    (with-current-buffer buffer
      (text-mode)
      (apply #'eglot (eglot--guess-contact))
      (should (docsession-eglot-test--wait (lambda () (eglot-current-server))))
      (should (docsession-eglot-test--wait (lambda () (eglot-managed-p)))))
    buffer))

(defun docsession-eglot-test--barrier (buffer)
  "Send BUFFER's pending changes, then a request the server answers after them."
  (with-current-buffer buffer
    (eglot--signal-textDocument/didChange)
    (jsonrpc-request (eglot-current-server) :workspace/executeCommand
                     `(:command "docsession.versions" :arguments [,(eglot--path-to-uri buffer-file-name)]))))

(defun docsession-eglot-test--journal-holds (dir text)
  "Whether a journal in DIR's state directory holds TEXT (UTF-8)."
  (cl-some (lambda (file)
             (with-temp-buffer
               (set-buffer-multibyte nil)
               (insert-file-contents-literally file)
               (search-forward (encode-coding-string text 'utf-8) nil t)))
           (file-expand-wildcards (expand-file-name "state/journal/*.journal" dir))))

(defun docsession-eglot-test--kill-server ()
  "kill -9 of the current buffer's server, and wait until eglot has seen it die."
  (let ((process (jsonrpc--process (eglot-current-server))))
    (signal-process process 'SIGKILL)
    (should (docsession-eglot-test--wait (lambda () (not (process-live-p process)))))
    ;; And eglot has seen it (its sentinel ran: the buffer is no longer managed), or killing the
    ;; buffer would send didClose to the dead process.
    (should (docsession-eglot-test--wait (lambda () (not (eglot-managed-p)))))))

(defun docsession-eglot-test--typed-then-killed (buffer dir text)
  "Insert TEXT at the end of BUFFER, wait until DIR's journal holds it, kill -9 the server, and
kill BUFFER without saving."
  (with-current-buffer buffer
    (goto-char (point-max))
    (insert text)
    (docsession-eglot-test--barrier buffer)
    (should (docsession-eglot-test--wait (lambda () (docsession-eglot-test--journal-holds dir text))))
    (docsession-eglot-test--kill-server)
    (set-buffer-modified-p nil))
  (kill-buffer buffer))

(defun docsession-eglot-test--recovering-open (dir path)
  "Visit PATH again (DIR's state) with \"Recover\" the answer, and wait until the user was asked;
the buffer. Call it inside `docsession-eglot-test--answering'."
  (let* ((docsession-eglot-test--answers (list "Recover"))
         (buffer (docsession-eglot-test--open dir path)))
    (should (docsession-eglot-test--wait (lambda () docsession-eglot-test--asked)))
    buffer))

(defun docsession-eglot-test--close (buffer)
  "Close BUFFER without saving and shut its server down."
  (when (buffer-live-p buffer)
    (let ((server (with-current-buffer buffer (eglot-current-server))))
      (with-current-buffer buffer (set-buffer-modified-p nil))
      (kill-buffer buffer)
      (when (and server (jsonrpc-running-p server))
        (eglot-shutdown server)))))

(setq eglot-confirm-server-initiated-edits nil)
;; A clean buffer whose file another program changed is reread without a question when the
;; server's reload edit reaches it (`find-file-noselect' asks otherwise): Emacs reverts it, and the
;; server's session follows the editor's change.
(setq revert-without-query '("."))
(setq eglot-autoshutdown nil)
(setq eglot-sync-connect 10)

(ert-deftest docsession-eglot-capabilities ()
  "initialize: eglot's capabilities get LSP's text synchronisation and the commands."
  (let* ((fresh (docsession-eglot-test--fresh "x\n"))
         (buffer (docsession-eglot-test--open (car fresh) (cdr fresh))))
    (unwind-protect
        (with-current-buffer buffer
          (should (equal (eglot--server-capable :textDocumentSync :change) 2))
          (should (eq (eglot--server-capable :textDocumentSync :openClose) t))
          (should (member "docsession.save"
                          (append (eglot--server-capable :executeCommandProvider :commands) nil))))
      (docsession-eglot-test--close buffer))))

(ert-deftest docsession-eglot-typing-saving-and-reloads ()
  "Typing reaches the server; Emacs's own save; another program's rewrites reload the clean buffer."
  (let* ((fresh (docsession-eglot-test--fresh "one\ntwo\n"))
         (dir (car fresh)) (path (cdr fresh))
         (buffer (docsession-eglot-test--open dir path))
         (docsession-eglot-test--asked nil)
         (docsession-eglot-test--yes-no nil))
    (docsession-eglot-test--answering
    (unwind-protect
        (with-current-buffer buffer
          (goto-char (point-min))
          (forward-line 1)
          (end-of-line)
          (insert " and a half")
          (goto-char (point-max))
          (insert "three é😀\n")
          (docsession-eglot-test--barrier buffer)
          (should (docsession-eglot-test--wait
                   (lambda () (docsession-eglot-test--journal-holds dir "three é😀"))))
          (save-buffer)
          (should (equal (docsession-eglot-test--file path) "one\ntwo and a half\nthree é😀\n"))
          (docsession-eglot-test--barrier buffer)
          ;; Emacs's own save is not another program's change; a rewrite is: the clean buffer
          ;; takes the file's text, nothing asked.
          (docsession-eglot-test--rewrite path "one\ntwo and a half\nthree é😀\nfour, from another program\n")
          (should (docsession-eglot-test--wait
                   (lambda () (equal (buffer-string) (docsession-eglot-test--file path)))))
          (should-not (buffer-modified-p))
          (should-not docsession-eglot-test--asked)
          (should-not docsession-eglot-test--yes-no)
          (docsession-eglot-test--barrier buffer)
          (docsession-eglot-test--rewrite path "ONE\ntwo and a half\nthree é😀\nfour, from another program\n")
          (should (docsession-eglot-test--wait
                   (lambda () (equal (buffer-string) (docsession-eglot-test--file path)))))
          (should-not docsession-eglot-test--asked)
          ;; The server's save writes what the buffer holds.
          (goto-char (point-max))
          (insert "five\n")
          (docsession-eglot-test--barrier buffer)
          (jsonrpc-request (eglot-current-server) :workspace/executeCommand
                           `(:command "docsession.save" :arguments [,(eglot--path-to-uri path)]))
          (should (equal (docsession-eglot-test--file path) (buffer-string))))
      (docsession-eglot-test--close buffer)))))

(ert-deftest docsession-eglot-conflict-merged ()
  "A conflict with unsaved edits, merged through the message request."
  (let* ((fresh (docsession-eglot-test--fresh "a\nb\nc\nd\ne\n"))
         (dir (car fresh)) (path (cdr fresh))
         (buffer (docsession-eglot-test--open dir path))
         (docsession-eglot-test--asked nil)
         (docsession-eglot-test--yes-no nil)
         (docsession-eglot-test--answers (list "Merge")))
    (unwind-protect
        (with-current-buffer buffer
          (goto-char (point-min))
          (delete-region (point) (line-end-position))
          (insert "A, mine")
          (docsession-eglot-test--barrier buffer)
          (docsession-eglot-test--answering
           (docsession-eglot-test--rewrite path "a\nb\nc\nd\nE, theirs\n")
           (should (docsession-eglot-test--wait (lambda () docsession-eglot-test--asked)))
           (should (string-match-p "changed on disk" (car (car docsession-eglot-test--asked))))
           (should (equal (cdr (car docsession-eglot-test--asked)) '("Keep mine" "Take theirs" "Merge")))
           (should (docsession-eglot-test--wait
                    (lambda () (equal (buffer-string) "A, mine\nb\nc\nd\nE, theirs\n"))))
           ;; Emacs asked whether to discard the buffer's edits for the file's text: no.
           (should (equal (length docsession-eglot-test--yes-no) 1))
           (should (string-match-p "Discard your edits" (car docsession-eglot-test--yes-no)))))
      (docsession-eglot-test--close buffer))))

(ert-deftest docsession-eglot-kill-9-and-recovery ()
  "kill -9 of the server during unsaved edits; the next open offers the edits back."
  (let* ((fresh (docsession-eglot-test--fresh "saved line\n"))
         (dir (car fresh)) (path (cdr fresh))
         (buffer (docsession-eglot-test--open dir path))
         (docsession-eglot-test--asked nil)
         (docsession-eglot-test--yes-no nil))
    (docsession-eglot-test--answering
    (unwind-protect
        (progn
          (docsession-eglot-test--typed-then-killed buffer dir "unsaved ✓\n")
          (should (equal (docsession-eglot-test--file path) "saved line\n"))
          (setq buffer (docsession-eglot-test--recovering-open dir path))
          (should (string-match-p "recover unsaved edits" (car (car docsession-eglot-test--asked))))
          (should (equal (cdr (car docsession-eglot-test--asked)) '("Recover" "Discard" "Not now")))
          (with-current-buffer buffer
            (should (docsession-eglot-test--wait
                     (lambda () (equal (buffer-string) "saved line\nunsaved ✓\n"))))
            (docsession-eglot-test--barrier buffer)
            (save-buffer)
            (should (equal (docsession-eglot-test--file path) "saved line\nunsaved ✓\n"))))
      (docsession-eglot-test--close buffer)))))

(ert-deftest docsession-eglot-new-file-kill-9-and-recovery ()
  "A buffer of a file not written yet: typed, the server killed, the edits offered back at the
next visit of the (still unwritten) file, then saved."
  (let* ((dir (make-temp-file "docsession-eglot-" t))
         (path (expand-file-name "new.txt" dir))
         (_ (make-directory (expand-file-name "state" dir)))
         (buffer (docsession-eglot-test--open dir path))
         (docsession-eglot-test--asked nil)
         (docsession-eglot-test--yes-no nil))
    (docsession-eglot-test--answering
    (unwind-protect
        (progn
          (docsession-eglot-test--typed-then-killed buffer dir "new ✓\n")
          (should-not (file-exists-p path))
          (setq buffer (docsession-eglot-test--recovering-open dir path))
          (should (string-match-p "new.txt: recover unsaved edits" (car (car docsession-eglot-test--asked))))
          (with-current-buffer buffer
            (should (docsession-eglot-test--wait (lambda () (equal (buffer-string) "new ✓\n"))))
            (docsession-eglot-test--barrier buffer)
            (save-buffer)
            (should (equal (docsession-eglot-test--file path) "new ✓\n"))
            (docsession-eglot-test--barrier buffer)
            ;; Saved by the editor: clean, so its journal goes.
            (should (docsession-eglot-test--wait
                     (lambda () (not (docsession-eglot-test--journal-holds dir "new ✓"))))))
          (should (= (length docsession-eglot-test--asked) 1)))
      (docsession-eglot-test--close buffer)))))

(ert-deftest docsession-eglot-quit-drops-the-journal ()
  "With the README's `kill-emacs-hook' of `eglot-shutdown-all', quitting Emacs (after it asked
about each modified buffer) says shutdown: the discarded edits are not offered back later."
  (let* ((fresh (docsession-eglot-test--fresh "kept\n"))
         (dir (car fresh)) (path (cdr fresh))
         (buffer (docsession-eglot-test--open dir path))
         (kill-emacs-hook nil))
    (unwind-protect
        (with-current-buffer buffer
          (goto-char (point-max))
          (insert "discarded at the quit\n")
          (docsession-eglot-test--barrier buffer)
          (should (docsession-eglot-test--wait
                   (lambda () (docsession-eglot-test--journal-holds dir "discarded at the quit"))))
          (let ((server (eglot-current-server)))
            (add-hook 'kill-emacs-hook #'eglot-shutdown-all)
            (run-hooks 'kill-emacs-hook)
            (should-not (jsonrpc-running-p server)))
          (should-not (docsession-eglot-test--journal-holds dir "discarded at the quit"))
          (set-buffer-modified-p nil))
      (docsession-eglot-test--close buffer))))

;; (`docsession.versions' and `docsession.restoreVersion' through eglot's own request function, as a
;; key binding or M-x command of the user's configuration would send them.)
(ert-deftest docsession-eglot-version-restored ()
  "Emacs's save is kept as a version; docsession.restoreVersion brings it back into the buffer."
  (let* ((fresh (docsession-eglot-test--fresh "version one\n"))
         (dir (car fresh)) (path (cdr fresh))
         (buffer (docsession-eglot-test--open dir path))
         (docsession-eglot-test--asked nil)
         (docsession-eglot-test--yes-no nil))
    (docsession-eglot-test--answering
     (unwind-protect
         (with-current-buffer buffer
           (let ((uri (eglot--path-to-uri path))
                 (server (eglot-current-server))
                 versions)
             (erase-buffer)
             (insert "version two\n")
             (docsession-eglot-test--barrier buffer)
             (save-buffer)
             (docsession-eglot-test--barrier buffer)
             (goto-char (point-max))
             (insert "unsaved three\n")
             (docsession-eglot-test--barrier buffer)
             ;; Versions are written in the background: wait for the one the save kept.
             (should (docsession-eglot-test--wait
                      (lambda ()
                        (setq versions (append (plist-get (jsonrpc-request server :workspace/executeCommand
                                                                           `(:command "docsession.versions" :arguments [,uri]))
                                                          :versions)
                                               nil)))))
             (let ((answer (jsonrpc-request server :workspace/executeCommand
                                            `(:command "docsession.restoreVersion"
                                              :arguments [,uri ,(plist-get (car versions) :id)]))))
               (should (eq (plist-get answer :applied) t)))
             (should (equal (buffer-string) "version two\n"))
             (should (equal (docsession-eglot-test--file path) "version two\n"))
             (should-not docsession-eglot-test--asked)
             (should-not docsession-eglot-test--yes-no)))
       (docsession-eglot-test--close buffer)))))

(provide 'eglot-test)
;;; eglot-test.el ends here
